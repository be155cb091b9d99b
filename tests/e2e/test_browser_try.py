"""The admin people see, in a real browser: structured JSON editors, the Try page's form, live progress
and cancel (AMB-70, AMB-71), and the front page (AMB-72)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.async_api import Page, expect

from tests.e2e.admin_pages import json_editor, json_status, run_try, signed_in, type_json
from tests.e2e.browser import PAGE_MS, Screenshots, sign_in
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, ServerProcess, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "item": {"type": "string", "description": "What to order."},
        "size": {"type": "string", "enum": ["small", "large"], "default": "small"},
        "count": {"type": "integer", "minimum": 1, "default": 2},
        "gift": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    "required": ["item"],
    "additionalProperties": False,
}


@pytest.fixture
def order_tool(server: DaphneServer) -> Iterator[str]:
    yield "browser_order"
    django_shell(
        server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='browser_order').delete()\n"
    )


async def open_try(page: Page, server: DaphneServer, name: str) -> None:
    await page.goto(f"{server.url}/admin/mcp_app/tool/?q={name}")
    async with page.expect_navigation():
        await page.get_by_role("link", name=name, exact=True).click()
    async with page.expect_navigation():
        await page.get_by_role("link", name="Try this tool").click()


async def test_an_editor_writes_a_schema_in_the_structured_editor_and_runs_the_tool_from_its_form(
    server: DaphneServer, order_tool: str, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", order_tool)
    await page.fill("#id_description", "Order something (made in the browser test).")
    # Checked as it is typed: the JSON first, then the server's own JSON Schema check.
    await type_json(page, "input_schema", '{"type": "object", ')
    assert (await json_status(page, "input_schema")).startswith("Invalid JSON:")
    await type_json(page, "input_schema", {"type": "object", "properties": {"size": {"type": "strin"}}})
    refused = await json_status(page, "input_schema")
    assert "Input schema is not a valid JSON Schema at properties/size/type" in refused, refused
    await shots.take(page, "schema-refused-as-typed")
    await type_json(page, "input_schema", ORDER_SCHEMA)
    assert "A valid JSON Schema." in await json_status(page, "input_schema")
    await page.select_option("#id_handler", "template")
    text = "{{ count }} x {{ size }} {{ item }} to {{ address.city }}, gift: {{ gift }}, tags: {{ tags }}"
    await type_json(page, "handler_config", {"text": text})
    await shots.take(page, "schema-accepted")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was added successfully" in await page.inner_text("body")
    # Saved, the editor shows the schema as a tree.
    await expect(json_editor(page, "input_schema").locator("div.jsoneditor-tree")).to_be_visible()

    async with page.expect_navigation():
        await page.get_by_role("link", name="Try this tool").click()
    field = page.locator("#try-fields")
    await expect(field.locator("[data-path=item] label")).to_have_text("item *")  # required
    assert await field.locator("[data-path=size] select").input_value() == '"small"'  # defaults filled
    assert await field.locator("[data-path=count] input").input_value() == "2"
    await field.locator("[data-path=item] input").fill("tea")
    await field.locator("[data-path=size] select").select_option(label="large")
    await field.locator("[data-path=gift] select").select_option("true")
    await field.locator("[data-path=tags] textarea").fill("green\nmint")
    await field.locator("[data-path='address.city'] input").fill("Oslo")
    await shots.take(page, "try-form")
    heading, body = await run_try(page)
    assert heading.startswith("Result (") and not heading.startswith("Result: error"), heading
    shown = json.loads(body)
    assert shown["content"][0]["text"] == "2 x large tea to Oslo, gift: True, tags: ['green', 'mint']", shown
    await shots.take(page, "try-result")
    # The raw JSON is one click away, and holds what the form sent.
    await page.click("#try-toggle")
    assert json.loads(await page.input_value("#id_arguments")) == {
        "item": "tea", "size": "large", "count": 2, "gift": True, "tags": ["green", "mint"],
        "address": {"city": "Oslo"},
    }  # fmt: skip


async def test_the_try_page_shows_progress_as_it_arrives(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "count_slowly")
    await page.locator("[data-path=n] input").fill("4")
    await page.locator("[data-path=delay] input").fill("0.6")
    await page.click("#try-run")
    # The first step is on the page while the call still runs: shown as it arrived, not at the end.
    await expect(page.locator("#try-progress-text")).to_have_text(re.compile(r"^1 of 4"), timeout=PAGE_MS)
    assert (await page.inner_text("#try-status")).startswith("Running")
    await shots.take(page, "progress-live")
    await expect(page.locator("#try-status")).to_have_text(re.compile(r"^Result \("), timeout=PAGE_MS)
    log = await page.inner_text("#try-log")
    assert log.count("progress") == 4 and "[info] count_slowly: count 4 of 4" in log, log
    assert json.loads(await page.inner_text("#try-result"))["structuredContent"] == {"count": 4}
    await shots.take(page, "progress-done")


async def test_cancel_on_the_try_page_stops_a_background_run_on_its_worker(
    server: DaphneServer, celery_worker: ServerProcess, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "count_in_background")
    await page.locator("[data-path=n] input").fill("50")
    await page.locator("[data-path=delay] input").fill("0.3")
    await page.click("#try-run")
    past_one = re.compile(r"^([2-9]|[1-4][0-9]) of 50")  # progress arrives; not every step is seen
    await expect(page.locator("#try-progress-text")).to_have_text(past_one, timeout=PAGE_MS)
    await page.get_by_role("button", name="Cancel the call").click()
    await expect(page.locator("#try-status")).to_have_text(re.compile(r"^Cancelled after"), timeout=PAGE_MS)
    await shots.take(page, "cancelled")
    # The worker stopped it: the run is recorded cancelled, long before its 15 s would have ended. The
    # page says "Cancelled" once the cancel is sent; the worker records it a moment later: wait (8 s at
    # most, so a run left going would still be "running" then).
    status = django_shell(
        server.env,
        "import time\nfrom mcp_app.models import ToolRun\n"
        "deadline = time.monotonic() + 8\n"
        "while True:\n"
        "    run = ToolRun.objects.filter(tool_name='count_in_background', session_id__startswith='admin-try-')"
        ".order_by('-queued_at').first()\n"
        "    if run.status != 'running' or time.monotonic() > deadline:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "print('status:', run.status)\n",
    )
    assert "status: cancelled" in status, status


async def test_a_question_the_tool_asks_is_a_form_on_the_try_page_and_the_answer_reaches_it(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "ask_user")
    await page.click("#try-run")
    question = page.locator(".try-question")
    await expect(question.locator(".try-question-message")).to_have_text(
        "What is your name?", timeout=PAGE_MS
    )
    await question.get_by_label("Your name *").fill("Ada")
    await shots.take(page, "asked")
    await question.get_by_role("button", name="Accept").click()
    await expect(page.locator("#try-status")).to_have_text(re.compile(r"^Result \("), timeout=PAGE_MS)
    assert json.loads(await page.inner_text("#try-result"))["structuredContent"] == {"name": "Ada"}
    await shots.take(page, "answered")


async def test_the_front_page_signs_a_person_in_and_lists_their_tenants_with_the_admin_for_staff(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/")
    await shots.take(page, "anonymous")
    async with page.expect_navigation():
        await page.get_by_role("link", name="Sign in").click()
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert page.url == f"{server.url}/"
    demo = page.locator("li.tenant[data-slug=demo]")
    await expect(demo.locator(".mcp-url")).to_have_text(server.mcp_url("demo"))
    await shots.take(page, "signed-in")
    async with page.expect_navigation():
        await page.get_by_role("link", name="Open the admin").click()
    # And the admin's "View site" leads back.
    async with page.expect_navigation():
        await page.get_by_role("link", name="View site").click()
    assert page.url == f"{server.url}/"


CHOICE_FORM = {
    "message": "Pick a plan",
    "fields": {
        "type": "object",
        "properties": {
            "plan": {
                "type": "string",
                "title": "Plan",
                "oneOf": [{"const": "p1", "title": "Starter"}, {"const": "p2", "title": "Pro"}],
                "default": "p1",
            },
            "bank": {
                "type": "string",
                "title": "Bank",
                "enum": ["b1", "b2"],
                "enumNames": ["First", "Second"],
            },
            "scopes": {
                "type": "array",
                "title": "Scopes",
                "items": {"anyOf": [{"const": "r", "title": "Read all"}, {"const": "w", "title": "Write"}]},
                "default": ["r"],
            },
        },
        "required": ["plan"],
    },
}


@pytest.fixture
def choice_tool(server: DaphneServer) -> Iterator[str]:
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='browser_choose', "
        f"defaults=dict(handler='form', handler_config={CHOICE_FORM!r}, timeout_seconds=60))\n",
    )
    yield "browser_choose"
    django_shell(
        server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='browser_choose').delete()\n"
    )


async def test_a_question_with_choices_shows_their_titles_starts_at_its_defaults_and_answers_values(
    server: DaphneServer, choice_tool: str, page: Page, request: pytest.FixtureRequest
) -> None:
    """AMB-120: the Try page builds a question's form from every choice shape of the spec."""
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, choice_tool)
    await page.click("#try-run")
    question = page.locator(".try-question")
    await expect(question.locator(".try-question-message")).to_have_text("Pick a plan", timeout=PAGE_MS)
    plan, bank, scopes = (
        question.get_by_label("Plan *"),
        question.get_by_label("Bank"),
        question.get_by_label("Scopes"),
    )
    await expect(plan.locator("option:checked")).to_have_text("Starter")  # its default, by its title
    await expect(scopes.locator("option:checked")).to_have_text(["Read all"])
    await expect(bank.locator("option")).to_have_text(["—", "First", "Second"])
    await plan.select_option(label="Pro")
    await bank.select_option(label="Second")
    await scopes.select_option(label=["Read all", "Write"])
    await shots.take(page, "asked")
    await question.get_by_role("button", name="Accept").click()
    await expect(page.locator("#try-status")).to_have_text(re.compile(r"^Result \("), timeout=PAGE_MS)
    answered = json.loads(await page.inner_text("#try-result"))["structuredContent"]
    assert answered == {"plan": "p2", "bank": "b2", "scopes": ["r", "w"]}
    await shots.take(page, "answered")
