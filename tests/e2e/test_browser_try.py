"""The admin people see, in a real browser: structured JSON editors, the Try page's form, live progress
and cancel (AMB-70, AMB-71), the client it plays and the results drawn as a client shows them (AMB-250,
AMB-251), and the front page (AMB-72)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.async_api import ConsoleMessage, Page, expect

from tests.e2e.admin_pages import (
    FINISHED,
    json_editor,
    json_status,
    raw_arguments,
    run_try,
    signed_in,
    type_json,
)
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


# --- The Try page plays every client part (AMB-250), and shows results as a client does (AMB-251) ---


@pytest.fixture
def console_errors(page: Page) -> Iterator[list[str]]:
    """Every console error and uncaught exception of the Try page; the test ends with none. (The
    change page on the way there, its JSON editor and the missing favicon are issue 24's polish.)"""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and "/try/" in page.url and not message.location.get("url", "").endswith(
            "/favicon.ico"
        ):
            errors.append(f"{message.text} at {message.location.get('url')}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)) if "/try/" in page.url else None)
    yield errors
    assert errors == []


async def choose_client(page: Page, era: str | None = None, **capabilities: bool) -> None:
    """Pick the revision and tick or untick capabilities (`sampling=False`, `elicitation_form=True`)."""
    if era is not None:
        await page.select_option("#try-era", era)
    for name, on in capabilities.items():
        await page.locator(f"input[name=capability][value='{name.replace('_', '.')}']").set_checked(on)


async def finished(page: Page) -> str:
    await expect(page.locator("#try-status")).to_have_class(FINISHED, timeout=PAGE_MS)
    return await page.inner_text("#try-status")


@pytest.mark.parametrize("era", ["2025-06-18", "2026-07-28"])
async def test_an_llm_tool_is_answered_by_typing_the_models_reply_in_either_era(
    server: DaphneServer, page: Page, console_errors: list[str], request: pytest.FixtureRequest, era: str
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "summarize")
    await expect(page.locator(".try-what-happens")).to_contain_text("An llm tool asks the client's own model")
    await page.locator("[data-path=text] textarea, [data-path=text] input").fill("Cats sleep a lot. Dogs bark.")
    await choose_client(page, era)
    await page.click("#try-run")
    question = page.locator(".try-question[data-method='sampling/createMessage']")
    await expect(question).to_be_visible(timeout=PAGE_MS)
    assert f"protocol {era}" in await page.inner_text("#try-status")
    shown = await question.locator(".try-sampling").inner_text()
    assert "You summarise texts faithfully" in shown and "Cats sleep a lot. Dogs bark." in shown, shown
    assert "Max tokens\n300" in shown, shown
    await question.get_by_label("The model's reply").fill("Cats sleep; dogs bark.")
    await shots.take(page, "sampling-asked")
    await question.get_by_role("button", name="Send the reply").click()
    heading = await finished(page)
    assert heading.startswith("Result ("), heading
    await expect(page.locator("#try-view .try-text")).to_have_text("Cats sleep; dogs bark.")
    await shots.take(page, "sampling-answered")


async def test_a_tool_asking_for_roots_gets_the_roots_entered_on_the_page(
    server: DaphneServer, page: Page, console_errors: list[str], request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "show_roots")
    await expect(page.locator(".try-what-happens")).to_contain_text("runs the callable 'show_roots'")
    await choose_client(page, "2026-07-28")  # a round trip: the page answers and calls again
    await page.click("#try-run")
    question = page.locator(".try-question[data-method='roots/list']")
    await question.get_by_label("Root 1 URI").fill("file:///home/ada/project", timeout=PAGE_MS)
    await question.get_by_label("Root 1 name").fill("Project")
    await question.get_by_role("button", name="Add a root").click()
    await question.get_by_label("Root 2 URI").fill("file:///srv/notes")
    await shots.take(page, "roots-asked")
    await question.get_by_role("button", name="Share these roots").click()
    assert (await finished(page)).startswith("Result (")
    await expect(page.locator("#try-view .try-text")).to_have_text(
        "The client shares 2 root(s):\n- file:///home/ada/project (Project)\n- file:///srv/notes"
    )
    await shots.take(page, "roots-answered")


async def test_a_capability_left_off_gets_the_plain_refusal_such_a_client_gets_in_each_era(
    server: DaphneServer, page: Page, console_errors: list[str], request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "summarize")
    await page.locator("[data-path=text] textarea, [data-path=text] input").fill("Anything.")
    await choose_client(page, "2025-11-25", sampling=False)
    heading = await finished_run(page)
    assert heading.startswith("Result: error"), heading
    said = await page.inner_text("#try-view")
    assert said.startswith("This tool needs a reply from the client's own language model (sampling)"), said
    assert "Use a client that supports sampling" in said and "protocol revision" not in said, said
    await expect(page.locator("#try-view")).to_have_class(re.compile(r"\btry-is-error\b"))
    await shots.take(page, "legacy-without-sampling")
    await choose_client(page, "2026-07-28")
    heading = await finished_run(page)
    assert heading.startswith("Protocol error"), heading
    said = await page.inner_text("#try-view")
    assert "This needs a reply from the client's own language model (sampling)" in said, said
    assert "Every client that does not declare sampling gets this same answer" in said, said
    await shots.take(page, "modern-without-sampling")
    # An older revision has no elicitation at all: the same form tool is refused there, saying why.
    await open_try(page, server, "ask_user")
    await choose_client(page, "2025-03-26")
    assert (await finished_run(page)).startswith("Result: error")
    said = await page.inner_text("#try-view")
    assert "a client on protocol revision 2025-03-26 cannot give (it came with 2025-06-18)" in said, said


async def finished_run(page: Page) -> str:
    await page.click("#try-run")
    return await finished(page)


async def test_results_are_drawn_as_a_client_shows_them_with_the_raw_json_one_click_away(
    server: DaphneServer, page: Page, console_errors: list[str], request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "show_logo")
    await expect(page.locator(".try-what-happens")).to_contain_text("A template tool fills its text")
    await finished_run(page)
    view = page.locator("#try-view")
    await expect(view.locator(".try-text")).to_have_text("Here is the demo logo.")
    image = view.locator("img.try-image")
    assert (await image.get_attribute("src") or "").startswith("data:image/png;base64,")
    assert await image.evaluate("img => img.complete && img.naturalWidth") == 16  # really decoded
    await expect(view.locator(".try-resource-link code")).to_have_text("demo://readme")
    await expect(view.locator(".try-resource figcaption code")).to_have_text("demo://readme")
    assert await page.is_hidden("#try-result")
    await page.get_by_role("button", name="Show the raw JSON").click()
    assert json.loads(await page.inner_text("#try-result"))["content"][1]["type"] == "image"
    await shots.take(page, "media")

    await open_try(page, server, "add")
    await page.locator("[data-path=a] input").fill("2")
    await page.locator("[data-path=b] input").fill("40")
    await finished_run(page)
    table = page.locator("#try-view table.try-table")
    await expect(table.locator("th")).to_have_text(["sum"])
    await expect(table.locator("td")).to_have_text(["42"])
    await shots.take(page, "table")
    await page.locator("#try-toggle").click()
    await page.fill("#id_arguments", '{"a": "two", "b": 1}')
    assert (await finished_run(page)).startswith("Result: error")
    await expect(page.locator("#try-view")).to_have_class(re.compile(r"\btry-is-error\b"))
    color = await page.locator("#try-view .try-text").evaluate("node => getComputedStyle(node).color")
    assert color == "rgb(186, 33, 33)", color  # the admin's error red
    await shots.take(page, "is-error")


async def test_an_approval_is_asked_on_the_page_and_the_tool_runs_once_approved(
    server: DaphneServer, page: Page, console_errors: list[str], request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, "delete_note")
    await page.locator("[data-path=note] input").fill("groceries")
    await choose_client(page, "2026-07-28")
    await page.click("#try-run")
    question = page.locator(".try-question .try-question-message")
    await expect(question).to_contain_text("Allow the tool Delete a note (delete_note) to run", timeout=PAGE_MS)
    await shots.take(page, "approval-asked")
    await page.locator(".try-question").get_by_role("button", name="Accept").click()
    assert (await finished(page)).startswith("Result (")
    await expect(page.locator("#try-view .try-text")).to_have_text("Deleted groceries.")


SENSITIVE = {
    "message": "Your key for {{ service }}",
    "sensitive": True,
    "fields": {"type": "object", "properties": {"api_key": {"type": "string", "title": "API key"}}, "required": ["api_key"]},
    "text": "Got a key for {{ service }}.",
}


@pytest.fixture
def sensitive_tool(server: DaphneServer) -> Iterator[str]:
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='browser_key', "
        f"defaults=dict(handler='form', handler_config={SENSITIVE!r}, timeout_seconds=60))\n",
    )
    yield "browser_key"
    django_shell(server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='browser_key').delete()\n")


async def test_a_url_mode_question_offers_its_link_and_the_form_filled_there_ends_the_call(
    server: DaphneServer, sensitive_tool: str, page: Page, console_errors: list[str], request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await open_try(page, server, sensitive_tool)
    await raw_arguments(page, {"service": "Acme"})
    await choose_client(page, elicitation_url=True)
    await page.click("#try-run")
    link = page.locator(".try-question .try-question-url a")
    await expect(link).to_have_attribute("href", re.compile(rf"^{re.escape(server.url)}/t/demo/form/"), timeout=PAGE_MS)
    await shots.take(page, "url-offered")
    await page.locator(".try-question").get_by_role("button", name="Accept").click()
    async with page.context.expect_page() as opened:
        await link.click()
    form_page = await opened.value
    await form_page.get_by_label("API key").fill("sk-live-123456")
    await form_page.get_by_role("button", name="Send").click()
    await form_page.get_by_role("status").wait_for()
    await form_page.close()
    assert (await finished(page)).startswith("Result (")
    await expect(page.locator("#try-view .try-text")).to_have_text("Got a key for Acme.")
