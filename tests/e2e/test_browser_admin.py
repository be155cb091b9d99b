"""The admin in a real browser: sign in, define a tool through the add form, try it, and a client sees it."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from playwright.async_api import Page

from tests.e2e.browser import Screenshots, forbidden_by_csrf, sign_in
from tests.e2e.helpers import REQUEST_SECONDS
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def body_text(page: Page) -> str:
    text = await page.inner_text("body")
    assert not forbidden_by_csrf(text), f"Django's CSRF page at {page.url}: {text[:500]}"
    return text


async def test_an_editor_adds_a_tool_in_the_browser_tries_it_and_a_client_can_call_it(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await shots.take(page, "admin-sign-in")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert "Site administration" in await body_text(page)

    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", "browser_shout")
    await page.fill("#id_description", "Shout a greeting (made in the browser test).")
    schema = {
        "type": "object",
        "properties": {"who": {"type": "string", "description": "Whom to greet."}},
        "required": ["who"],
        "additionalProperties": False,
    }
    await page.fill("#id_input_schema", json.dumps(schema, indent=2))
    await page.select_option("#id_handler", "template")
    await page.fill("#id_handler_config", json.dumps({"text": "HELLO, {{ who }}!"}))
    await shots.take(page, "add-tool")
    async with page.expect_navigation():
        await page.click("input[name=_continue]")
    text = await body_text(page)
    assert "was added successfully" in text, text[:2000]
    await shots.take(page, "tool-saved")

    async with page.expect_navigation():
        await page.get_by_role("link", name="Try this tool").click()
    await page.fill("#id_arguments", json.dumps({"who": "Ada"}))
    async with page.expect_navigation():
        await page.click("input[type=submit][value=Run]")
    shown = json.loads(await page.inner_text("#try-result"))
    assert shown["content"] == [{"type": "text", "text": "HELLO, Ada!"}] and not shown.get("isError"), shown
    assert "Result" in await body_text(page)
    await shots.take(page, "try-result")

    # Arguments the schema refuses: the same error a client would get, shown on the page.
    await page.fill("#id_arguments", json.dumps({"who": 7}))
    async with page.expect_navigation():
        await page.click("input[type=submit][value=Run]")
    refused = await page.inner_text("#try-result")
    assert "7 is not of type 'string'" in refused, refused
    await shots.take(page, "try-refused")

    async with Client(server.mcp_url("demo"), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client:
        result = await client.call_tool("browser_shout", {"who": "Grace"})
    assert [block.text for block in result.content] == ["HELLO, Grace!"]
