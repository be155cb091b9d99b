"""History and the connect page in a real browser: revert an edit, then copy a configuration."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import REQUEST_SECONDS
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TOOL = "browser_history"


@pytest.fixture
def history_tool(server: DaphneServer) -> Iterator[int]:
    """A copy of the demo's greet with its own history; removed afterwards."""
    out = django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='greet')\n"
        f"tool.pk = None\ntool.version = 0\ntool.name = {TOOL!r}\ntool.description = 'Greets, version one.'\ntool.save()\n"
        "print('PK', tool.pk)\n",
    )
    yield int(out.split("PK", 1)[1].split()[0])
    django_shell(
        server.env, f"from mcp_app.models import Tool\nTool.objects.filter(name={TOOL!r}).delete()\n"
    )


async def description_seen_by_a_client(server: DaphneServer) -> str:
    async with Client(server.mcp_url("demo"), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    return tools[TOOL].description or ""


async def test_an_editor_reverts_an_edit_from_the_history_page_and_copies_a_config_from_the_connect_page(
    server: DaphneServer, history_tool: int, page: Page, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)

    # Edit the description through the change form, as a person does.
    await page.goto(f"{server.url}/admin/mcp_app/tool/{history_tool}/change/")
    await page.fill("#id_description", "Greets, version two.")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was changed successfully" in await body_text(page)
    assert await description_seen_by_a_client(server) == "Greets, version two."

    # History: the diff names the change; revert to the first version.
    async with page.expect_navigation():
        await page.get_by_role("link", name="History", exact=True).click()
    text = await body_text(page)
    assert "- Greets, version one." in text and "+ Greets, version two." in text, text[:2000]
    await shots.take(page, "history")
    async with page.expect_navigation():
        await (
            page.locator("section.hist-version")
            .last.get_by_role("button", name="Roll back to version 1")
            .click()
        )
    text = await body_text(page)
    assert "is rolled back" in text and "Rolled back to version 1 (" in text, text[:2000]
    await shots.take(page, "reverted")
    await page.goto(f"{server.url}/admin/mcp_app/tool/{history_tool}/change/")
    assert await page.input_value("#id_description") == "Greets, version one."
    assert await description_seen_by_a_client(server) == "Greets, version one."

    # The connect page: reachable from the tenant's admin page; copy the Claude Code command.
    await page.goto(f"{server.url}/admin/tenants/tenant/")
    async with page.expect_navigation():
        await page.get_by_role("link", name="demo", exact=True).click()
    async with page.expect_navigation():
        await page.get_by_role("link", name="Connect page").click()
    assert page.url == f"{server.url}/t/demo/connect"
    assert (await page.inner_text("#mcp-url")).strip() == server.mcp_url("demo")
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    button = page.locator("button[data-copy=config-claude-code]")
    await button.click()
    await page.wait_for_function(
        "document.querySelector('button[data-copy=config-claude-code]').textContent === 'Copied'"
    )
    copied = await page.evaluate("navigator.clipboard.readText()")
    assert copied == f"claude mcp add --transport http demo {server.mcp_url('demo')}"
    # What the page lists is what a client lists: the tool is there, in both eras.
    for era in ("legacy", "modern"):
        listed = json.loads(await page.locator(f"#result-{era}-tools").text_content() or "")
        assert TOOL in [tool["name"] for tool in listed["tools"]], era
    await shots.take(page, "connect")

    # The Python script, pasted as shown, runs with the installed SDK and lists the same tools.
    script = tmp_path / "connect.py"
    script.write_text(await page.locator("#config-python").text_content() or "")
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert f"{TOOL}: Greets, version one." in run.stdout.splitlines(), run.stdout
