"""Issue 12's two journeys of a new user, each in one flow in a real browser (Chromium driven by Playwright):
in the admin (create a tool with its schema, try it, revert an edit, connect page, usage dashboard) while an
SDK client stays connected, and the same first steps through the API's own documentation page.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from playwright.async_api import Locator, Page, expect

from tests.e2e.admin_pages import body_text, json_editor, run_try, signed_in, type_json
from tests.e2e.browser import PAGE_MS, Screenshots, sign_in
from tests.e2e.helpers import Inbox, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

JOURNEY_TOOL = "journey_forecast"
API_TOOL = "journey_from_docs"
FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "Where."},
        "days": {"type": "integer", "minimum": 1, "default": 3},
    },
    "required": ["city"],
    "additionalProperties": False,
}
# usage_server flushes every second; this bounds the wait for the flush and the page's reloads.
DASHBOARD_SECONDS = 20.0


def remove_tools(server: DaphneServer, *names: str) -> None:
    django_shell(
        server.env,
        f"from mcp_app.models import Tool\nTool.objects.filter(name__in={list(names)!r}).delete()\n",
    )


@pytest.fixture
def journey_tool(usage_server: DaphneServer) -> Iterator[str]:
    yield JOURNEY_TOOL
    remove_tools(usage_server, JOURNEY_TOOL)


@pytest.fixture
def api_tool(server: DaphneServer) -> Iterator[str]:
    yield API_TOOL
    remove_tools(server, API_TOOL)


async def dashboard_calls(page: Page, tool: str, expected: int) -> Locator:
    """Reload the dashboard until its table counts `expected` tools/call of `tool` (after a flush)."""
    row = page.locator("#per-tool tbody tr").filter(has=page.locator("td", has_text=re.compile(f"^{tool}$")))
    deadline = time.monotonic() + DASHBOARD_SECONDS
    while True:
        if await row.count() == 1 and await row.locator("td.n").first.inner_text() == str(expected):
            return row
        if time.monotonic() > deadline:
            seen = await row.all_inner_texts() if await row.count() else "no row"
            pytest.fail(f"the dashboard did not count {expected} calls of {tool} in time; saw {seen}")
        await page.wait_for_timeout(500)  # between two reloads: a flush is due every second
        await page.reload()


async def test_a_new_user_creates_tries_reverts_a_tool_connects_and_sees_its_calls_while_a_client_stays_connected(
    usage_server: DaphneServer, journey_tool: str, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    inbox = Inbox()
    async with mcp_client(usage_server.mcp_url("demo"), inbox) as client:
        await inbox.wait_for_get_stream()

        # Sign in, and create the tool with its input schema in the structured JSON editor.
        await signed_in(page, usage_server)
        await page.goto(f"{usage_server.url}/admin/mcp_app/tool/add/")
        await page.select_option("#id_tenant", label="demo")
        await page.fill("#id_name", journey_tool)
        await page.fill("#id_description", "Forecast, first version.")
        await type_json(page, "input_schema", FORECAST_SCHEMA)
        await page.select_option("#id_handler", "template")
        await type_json(page, "handler_config", {"text": "{{ days }} days of sun in {{ city }}."})
        await shots.take(page, "add-tool")
        async with page.expect_navigation():
            await page.click("input[name=_publish]")
        assert "was added successfully" in await body_text(page)
        await expect(json_editor(page, "input_schema").locator("div.jsoneditor-tree")).to_be_visible()
        change_url = page.url

        # Try it from the form generated from its schema.
        async with page.expect_navigation():
            await page.get_by_role("link", name="Try this tool").click()
        fields = page.locator("#try-fields")
        await expect(fields.locator("[data-path=city] label")).to_have_text("city *")
        assert await fields.locator("[data-path=days] input").input_value() == "3"
        await fields.locator("[data-path=city] input").fill("Lisbon")
        await fields.locator("[data-path=days] input").fill("5")
        heading, result = await run_try(page)
        assert heading.startswith("Result (") and not heading.startswith("Result: error"), heading
        assert json.loads(result)["content"] == [{"type": "text", "text": "5 days of sun in Lisbon."}], result
        await shots.take(page, "tried")

        # Edit the description, then revert the edit from the history page.
        await page.goto(change_url)
        await page.fill("#id_description", "Forecast, an edit to undo.")
        async with page.expect_navigation():
            await page.click("input[name=_publish]")
        assert "was changed successfully" in await body_text(page)
        async with page.expect_navigation():
            await page.get_by_role("link", name="History", exact=True).click()
        text = await body_text(page)
        assert "- Forecast, first version." in text and "+ Forecast, an edit to undo." in text, text[:2000]
        first = page.locator("section.hist-version").last  # newest first
        async with page.expect_navigation():
            await first.get_by_role("button", name="Roll back to version 1").click()
        assert "is rolled back" in await body_text(page)
        await shots.take(page, "reverted")
        await page.goto(change_url)
        assert await page.input_value("#id_description") == "Forecast, first version."

        # The connect page, from the tenant's admin page: the tool is served, as the reverted version.
        await page.goto(f"{usage_server.url}/admin/tenants/tenant/")
        async with page.expect_navigation():
            await page.get_by_role("link", name="demo", exact=True).click()
        async with page.expect_navigation():
            await page.get_by_role("link", name="Connect page").click()
        assert (await page.inner_text("#mcp-url")).strip() == usage_server.mcp_url("demo")
        for era in ("legacy", "modern"):
            listed = json.loads(await page.locator(f"#result-{era}-tools").text_content() or "")
            served = {tool["name"]: tool for tool in listed["tools"]}
            assert served[journey_tool]["description"] == "Forecast, first version.", era
        await shots.take(page, "connect")

        # The client connected before all this was told the list changed, and calls the new tool.
        await inbox.wait_for("notifications/tools/list_changed")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools[journey_tool].description == "Forecast, first version."
        for city in ("Oslo", "Rome"):
            called = await client.call_tool(journey_tool, {"city": city})
            assert not called.is_error and called.content[0].text == f"3 days of sun in {city}.", called

    # Its calls on the usage dashboard, from the front page's link.
    await page.goto(f"{usage_server.url}/")
    async with page.expect_navigation():
        await page.locator("li.tenant[data-slug=demo]").get_by_role("link", name="Usage dashboard").click()
    row = await dashboard_calls(page, journey_tool, 2)
    assert (await row.locator("td").first.inner_text()) == "tools/call"
    await shots.take(page, "dashboard")


async def try_it_out(operation: Locator) -> None:
    """Open an operation of the Swagger UI page and press its "Try it out" button."""
    await operation.locator(".opblock-summary").first.click()
    await operation.get_by_role("button", name="Try it out").click()
    await operation.locator("tr[data-param-name=slug] input").fill("demo")


async def execute(operation: Locator) -> tuple[str, str]:
    """Press Execute; the live response's status code and body, as the page shows them."""
    responses = operation.locator(".live-responses-table .response")
    live = responses.first
    clear = operation.get_by_role("button", name="Clear")
    if await clear.count():  # the previous answer would be read as this one's
        await clear.click()
        await expect(responses).to_have_count(0)
    await operation.get_by_role("button", name="Execute").click()
    await expect(live.locator(".response-col_status")).to_have_text(re.compile(r"\d{3}"), timeout=PAGE_MS)
    status = (await live.locator(".response-col_status").inner_text()).split()[0]
    return status, await live.locator(".response-col_description pre").first.inner_text()


async def test_the_same_steps_work_through_the_api_from_its_documentation_page(
    server: DaphneServer, api_tool: str, page: Page, request: pytest.FixtureRequest
) -> None:
    """A person opens the docs first, signs in from its link in another tab and comes back (AMB-78)."""
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/api/v1/docs/")
    listing = page.locator("#operations-tenants-tenants_tools_list")
    await try_it_out(listing)
    status, body = await execute(listing)
    assert status in {"401", "403"} and "credentials were not provided" in body, (status, body)
    await shots.take(page, "signed-out")

    # The page says where to sign in; the admin's session is the API's too (AMB-51). Signing in
    # rotates the CSRF token, so the token the page was rendered with is stale from here on.
    async with page.context.expect_page() as opened:
        await page.get_by_role("link", name="sign in").click(modifiers=["Control"])
    tab = await opened.value
    await tab.wait_for_load_state()
    await sign_in(tab, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert tab.url == f"{server.url}/api/v1/docs/"
    await tab.close()

    status, body = await execute(listing)
    assert status == "200", body
    assert "greet" in {tool["name"] for tool in json.loads(body)["results"]}
    await shots.take(page, "listed")

    creating = page.locator("#operations-tenants-tenants_tools_create")
    await try_it_out(creating)
    tool = {
        "name": api_tool,
        "description": "Made from the API's documentation page.",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
        "handler": "template",
        "handler_config": {"text": "Documented, {{ who }}."},
    }
    await creating.locator("textarea.body-param__text").fill(json.dumps(tool, indent=2))
    status, body = await execute(creating)
    await shots.take(page, "created")
    assert status == "201", body
    assert json.loads(body)["name"] == api_tool

    async with mcp_client(server.mcp_url("demo")) as client:
        assert api_tool in {listed.name for listed in (await client.list_tools()).tools}
        called = await client.call_tool(api_tool, {"who": "Ada"})
    assert not called.is_error and called.content[0].text == "Documented, Ada.", called
