"""The admin in a real browser: sign in, define a tool through the add form, try it, and a client sees it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitResult
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text, raw_arguments, run_try, type_json
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import REQUEST_SECONDS, sdk_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


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
    await type_json(page, "input_schema", schema)
    await page.select_option("#id_handler", "template")
    await type_json(page, "handler_config", {"text": "HELLO, {{ who }}!"})
    await shots.take(page, "add-tool")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    text = await body_text(page)
    assert "was added successfully" in text, text[:2000]
    await shots.take(page, "tool-saved")

    async with page.expect_navigation():
        await page.get_by_role("link", name="Try this tool").click()
    await raw_arguments(page, {"who": "Ada"})
    await run_try(page)
    shown = json.loads(await page.inner_text("#try-result"))
    assert shown["content"] == [{"type": "text", "text": "HELLO, Ada!"}] and not shown.get("isError"), shown
    assert "Result" in await body_text(page)
    await shots.take(page, "try-result")

    # Arguments the schema refuses: the same error a client would get, shown on the page.
    await raw_arguments(page, {"who": 7})
    _, refused = await run_try(page)
    assert "7 is not of type 'string'" in refused, refused
    await shots.take(page, "try-refused")

    async with Client(server.mcp_url("demo"), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client:
        result = await client.call_tool("browser_shout", {"who": "Grace"})
    assert [block.text for block in result.content] == ["HELLO, Grace!"]


@pytest.fixture
def existing_tool(server: DaphneServer) -> Iterator[str]:
    """A tool that was there before (a copy of the demo's greet), so other tests keep the real one."""
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='greet')\n"
        "tool.pk = None\ntool.name = 'browser_greet'\ntool.save()\n",
    )
    yield "browser_greet"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "Tool.objects.filter(name__in=['browser_greet', 'browser_feedback']).delete()\n",
    )


def person(asked: list[str]) -> Any:
    """What a person answers: "good" to the form; approves greeting Ada and declines greeting Bo."""

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        if "mood" in (params.requested_schema or {}).get("properties", {}):
            return ElicitResult(action="accept", content={"mood": "good"})
        return ElicitResult(action="decline" if "Bo" in params.message else "accept", content={})

    return answer


async def test_an_editor_defines_a_form_and_an_approval_in_the_browser_and_clients_of_both_eras_use_them(
    server: DaphneServer, existing_tool: str, page: Page, request: pytest.FixtureRequest
) -> None:
    """Issue 11's "done means": no code, only the admin; then the SDK client in legacy and auto mode."""
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)

    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", "browser_feedback")
    await type_json(page, "input_schema", {"type": "object", "properties": {}})
    await page.select_option("#id_handler", "form")
    form = {
        "message": "How was your day?",
        "fields": {
            "type": "object",
            "properties": {"mood": {"type": "string", "enum": ["good", "bad"]}},
            "required": ["mood"],
        },
        "text": "Noted: {{ mood }}.",
    }
    await type_json(page, "handler_config", form)
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was added successfully" in await body_text(page)

    # An approval on an existing tool: it asks every time from now on.
    await page.goto(f"{server.url}/admin/mcp_app/tool/?q={existing_tool}")
    async with page.expect_navigation():
        await page.get_by_role("link", name=existing_tool, exact=True).click()
    await page.select_option("#id_approval", "every_time")
    await shots.take(page, "approval")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was changed successfully" in await body_text(page)

    for mode in ("legacy", "auto"):
        asked: list[str] = []
        async with sdk_client(server.mcp_url("demo"), mode, elicitation_callback=person(asked)) as client:
            await wait_for_tool(client, "browser_feedback")
            feedback = await client.call_tool("browser_feedback", {})
            greeted = await client.call_tool(existing_tool, {"name": "Ada"})
            refused = await client.call_tool(existing_tool, {"name": "Bo"})
        assert feedback.content[0].text == "Noted: good.", mode
        assert greeted.content[0].text == "Hello, Ada!" and not greeted.is_error, mode
        assert refused.is_error and "declined" in refused.content[0].text, mode
        assert (
            asked[0] == "How was your day?" and existing_tool in asked[1] and '"name": "Ada"' in asked[1]
        ), mode

    # Every decision is in the admin, with what was asked.
    await page.goto(f"{server.url}/admin/mcp_app/approvaldecision/")
    decisions = await body_text(page)
    assert decisions.count("approved") >= 2 and decisions.count("declined") >= 2
    await shots.take(page, "decisions")


async def wait_for_tool(client: Client, name: str) -> None:
    """An edit reaches every Daphne process at once with Redis, within seconds without it."""
    async with asyncio.timeout(REQUEST_SECONDS):
        while name not in {tool.name for tool in (await client.list_tools()).tools}:
            await asyncio.sleep(0.2)
