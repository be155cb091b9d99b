"""Drafts in a real browser: Save draft keeps clients on the published version, Try runs the draft, the
drafts page publishes it, the history numbers and compares versions (AMB-218..221)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp import Client
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import REQUEST_SECONDS
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TOOL = "browser_drafts"


@pytest.fixture
def drafted_tool(server: DaphneServer) -> Iterator[int]:
    """A copy of the demo's greet, published as version 1; removed afterwards."""
    out = django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='greet')\n"
        f"tool.pk = None\ntool.version = 0\ntool.name = {TOOL!r}\ntool.description = 'Published words.'\n"
        "tool.save()\nprint('PK', tool.pk)\n",
    )
    yield int(out.split("PK", 1)[1].split()[0])
    django_shell(
        server.env, f"from mcp_app.models import Tool\nTool.objects.filter(name={TOOL!r}).delete()\n"
    )


async def seen_by_clients(server: DaphneServer) -> set[str]:
    """The tool's description as each kind of client lists it (legacy and 2026-07-28)."""
    seen = set()
    for mode in ("legacy", "auto"):
        async with Client(
            server.mcp_url("demo"), mode=mode, read_timeout_seconds=REQUEST_SECONDS, cache=None
        ) as c:
            tools = {tool.name: tool for tool in (await c.list_tools()).tools}
        seen.add(tools[TOOL].description or "")
    return seen


async def served(server: DaphneServer) -> None:
    """Wait until the server lists the tool another process made: without Redis a server rereads the
    tenant's version every 5 s (catalog/tokens.py), and a test faster than that saw the old list."""
    for _ in range(40):
        async with Client(
            server.mcp_url("demo"), mode="auto", read_timeout_seconds=REQUEST_SECONDS, cache=None
        ) as c:
            if TOOL in {tool.name for tool in (await c.list_tools()).tools}:
                return
        await asyncio.sleep(0.25)
    pytest.fail(f"the server did not list {TOOL} within 10 s")


async def test_a_draft_is_tried_then_published_from_the_drafts_page(
    server: DaphneServer, drafted_tool: int, page: Page, request: pytest.FixtureRequest
) -> None:
    await served(server)
    shots = Screenshots(request.node.name)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)

    change = f"{server.url}/admin/mcp_app/tool/{drafted_tool}/change/"
    await page.goto(change)
    assert "Published: version 1." in await page.inner_text("#draft-status")
    await page.fill("#id_description", "Drafted words.")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    text = await body_text(page)
    assert "clients still get version 1 until it is published" in text, text[:2000]
    assert await seen_by_clients(server) == {"Published words."}

    await page.goto(change)
    banner = await page.inner_text("#draft-status")
    assert "Clients get version 1." in banner and "description" in banner, banner
    assert await page.input_value("#id_description") == "Drafted words."
    await shots.take(page, "draft-form")

    # Try runs the draft.
    async with page.expect_navigation():
        await page.get_by_role("link", name="Try this tool").click()
    assert "You are trying the draft" in await page.inner_text("#try-draft")
    assert "Drafted words." in await page.inner_text(".try-description")
    await shots.take(page, "try-draft")

    # The drafts page lists it with its diff; publishing tells clients.
    await page.goto(f"{server.url}/admin/mcp_app/tool/drafts/")
    section = page.locator("#drafts-demo")
    assert TOOL in await section.inner_text()
    await shots.take(page, "drafts-page")
    async with page.expect_navigation():
        await section.get_by_role("button", name="Publish all drafts of demo").click()
    assert f"{TOOL} (v2)" in await body_text(page) or f"Published {TOOL} as version 2" in await body_text(
        page
    )
    assert await seen_by_clients(server) == {"Drafted words."}

    # Versions are numbered; any two compare.
    await page.goto(f"{server.url}/admin/mcp_app/tool/{drafted_tool}/history/")
    text = await body_text(page)
    assert "Version 2 ·" in text and "Version 1 ·" in text, text[:2000]
    async with page.expect_navigation():
        await page.get_by_role("button", name="Compare").click()
    text = await body_text(page)
    assert "- Published words." in text and "+ Drafted words." in text, text[:2000]
    await shots.take(page, "compare")
    assert errors == [], errors
