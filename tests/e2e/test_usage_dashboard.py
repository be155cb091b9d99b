"""Usage seen by a person: calls made with the official MCP SDK client on two real Daphne processes
show up, added together, on the tenant's dashboard after their flushes; the page draws its charts in
a real browser without fetching anything from elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from mcp import MCPError

from tests.e2e.browser import PAGE_MS, Screenshots, sign_in
from tests.e2e.helpers import MCP_HEADERS, REQUEST_SECONDS, AdminBrowser, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell, start_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

FLUSH_WAIT = 25.0  # the package's server flushes every 10 s (the default), usage_server every second
MODERN = "2026-07-28"


@pytest.fixture
async def admin(usage_server: DaphneServer) -> AsyncIterator[AdminBrowser]:
    async with AdminBrowser(usage_server.url) as browser:
        await browser.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        yield browser


async def poll(check: Callable[[], Awaitable[Any]], what: str, seen: Callable[[], str] = str) -> Any:
    """Await `check` until it returns something truthy; fail after FLUSH_WAIT seconds, saying what was `seen`."""
    deadline = time.monotonic() + FLUSH_WAIT
    while not (found := await check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {FLUSH_WAIT:.0f} s waiting for {what}; saw {seen()}", pytrace=False)
        await asyncio.sleep(0.5)
    return found


def tool_row(page: str, tool: str) -> tuple[int, int, int] | None:
    """(calls, errors, isError) of tools/call `tool` in the dashboard's table, if it is there."""
    found = re.search(
        rf"<td>tools/call</td><td>{re.escape(tool)}</td><td class=\"n\">(\d+)</td><td class=\"n\">(\d+)</td>"
        r"<td class=\"n\">(\d+)</td>",
        page,
    )
    return tuple(int(n) for n in found.groups()) if found else None  # type: ignore[return-value]


def tenant_of_this_test(env: dict[str, str]) -> tuple[str, str]:
    """A tenant and tool only this test uses: no other test's calls reach its dashboard, and each
    process loads its catalog on first use (without Redis no process hears of another's new rows)."""
    slug, name = f"usage-{secrets.token_hex(3)}", "counted"
    django_shell(
        env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"Tool.objects.create(tenant=tenant, name={name!r}, handler='template', handler_config={{'text': 'Counted.'}})\n",
    )
    return slug, name


async def test_sdk_calls_on_two_processes_add_up_on_the_dashboard_with_open_sessions_and_listeners(
    server: DaphneServer, usage_server: DaphneServer, admin: AdminBrowser
) -> None:
    slug, counted = tenant_of_this_test(usage_server.env)
    async with mcp_client(usage_server.mcp_url(slug)) as legacy:
        for _ in range(3):
            await legacy.call_tool(counted, {})
        with pytest.raises(MCPError):
            await legacy.call_tool("no_such_tool", {})
        async with mcp_client(server.mcp_url(slug), mode="auto") as modern:  # the other process, 2026-07-28
            for _ in range(2):
                await modern.call_tool(counted, {})
        listen = {
            "jsonrpc": "2.0",
            "id": "usage-listener",
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"toolsListChanged": True},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {**MCP_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
        async with (
            httpx.AsyncClient(timeout=REQUEST_SECONDS) as http,
            http.stream("POST", usage_server.mcp_url(slug), json=listen, headers=headers) as stream,
        ):
            assert stream.status_code == 200
            chunks = stream.aiter_text()  # held: a dropped iterator would close the stream
            first = await anext(chunks)
            assert "notifications/subscriptions/acknowledged" in first

            last = [""]

            async def dashboard() -> str | None:
                page = last[0] = (await admin.http.get(f"/t/{slug}/dashboard")).text
                complete = tool_row(page, counted) == (5, 0, 0) and "<b>1</b>listening streams" in page
                return page if complete else None

            page = await poll(
                dashboard,
                f"5 calls of {counted} and 1 listener on the dashboard",
                lambda: (
                    f"{counted} {tool_row(last[0], counted)}; "
                    + " ".join(re.findall(r'<div class="stat"[^>]*>(.*?)</div>', last[0]))
                ),
            )
    assert re.search(r"<b>[1-9]\d*</b>open sessions", page), "the SDK's legacy session is open"
    assert "<td>tools/call</td><td>no_such_tool</td>" in page
    assert "no_such_tool" in page.split('id="recent-errors"')[1]  # with its request
    assert page.count('<svg class="chart"') == 4


async def test_the_dashboard_draws_its_charts_in_a_real_browser_from_this_server_only(
    usage_server: DaphneServer, page, request: pytest.FixtureRequest
) -> None:
    async with mcp_client(usage_server.mcp_url()) as client:
        await client.call_tool("echo", {"message": "for the chart"})
    shots = Screenshots(request.node.name)
    origins: set[str] = set()
    page.on("request", lambda r: origins.add(f"{urlsplit(r.url).scheme}://{urlsplit(r.url).netloc}"))
    await page.goto(f"{usage_server.url}/t/demo/dashboard")
    assert "/admin/login/" in page.url  # signed out: the sign-in page first
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert page.url.endswith("/t/demo/dashboard")

    async def drawn() -> bool | None:
        # The session's first requests and the call can land in different flushes (one a second):
        # the line charts may already draw while the echo call is not counted yet, so the bar of
        # calls per tool, and echo's row, are waited for as well (another test's calls of the demo's
        # other tools on this server may have drawn a bar already).
        await page.reload()
        lines = await page.locator("svg.chart .series").count()
        bars = await page.locator("svg.chart rect.bar").count()
        echo = await page.locator("#per-tool").get_by_text("echo").count()
        return True if lines >= 3 and bars >= 1 and echo >= 1 else None

    await poll(drawn, "the charts to show the echo call")
    charts = page.locator("svg.chart")
    assert await charts.count() == 4
    for i in range(4):
        box = await charts.nth(i).bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 25, (i, box)
    bar = await page.locator("svg.chart rect.bar").first.bounding_box()
    assert bar is not None and bar["width"] > 0
    assert await page.locator("#per-tool").get_by_text("echo").count() >= 1
    await shots.take(page, "dashboard")
    await page.click("text=last week", timeout=PAGE_MS)
    assert "window=week" in page.url and await page.locator("svg.chart").count() == 4
    await page.click("text=all tenants")
    assert await page.locator("#tenants").get_by_text("demo", exact=True).count() == 1
    await shots.take(page, "overview")
    assert origins == {usage_server.url}, f"the page fetched from elsewhere: {json.dumps(sorted(origins))}"


async def test_a_server_stopped_with_sigterm_writes_its_last_counts_on_the_way_out(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Between two flushes a stopping process still has counts in memory: its exit hook writes them."""
    quiet = start_daphne(
        "daphne-usage-exit",
        {**e2e_env, "MCP_USAGE_FLUSH_SECONDS": "3600"},  # no timed flush during this test
        tmp_path_factory.mktemp("daphne-usage-exit"),
    )
    probe = "usage_exit_probe"  # an unknown tool: its calls are counted under this name only here
    count = (
        "from mcp_app.models import UsageBucket\n"
        f"print(sum(UsageBucket.objects.filter(tool={probe!r}).values_list('calls', flat=True)))"
    )
    try:
        async with mcp_client(quiet.mcp_url()) as client:
            for _ in range(3):
                with pytest.raises(MCPError):
                    await client.call_tool(probe, {})
        assert django_shell(e2e_env, count).split()[-1] == "0"  # still only in the process's memory
    finally:
        quiet.stop()  # SIGTERM
    assert quiet.proc.returncode is not None
    assert django_shell(e2e_env, count).split()[-1] == "3"
