"""The tool form per kind in a real browser (AMB-260, AMB-261): a person chooses a kind, sees only its
fields and a working example, saves, and a client calls the tool; the argument table builds the input
schema; the prompt message editor builds a prompt that prompts/get renders. No console error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_types import CreateMessageRequestParams, CreateMessageResult, ElicitResult, TextContent
from playwright.async_api import ConsoleMessage, Page, expect

from tests.e2e.admin_pages import body_text, signed_in, type_json
from tests.e2e.browser import Screenshots, chromium
from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

# Per kind: the rows it shows, the rows it hides, its arguments and what a client then reads.
KINDS: dict[str, dict[str, Any]] = {
    "template": {"shows": ["handler_config"], "hides": ["python_callable", "secret_headers"],
                 "arguments": {"name": "Ada", "shout": True}, "reads": "Hello, Ada! HOW ARE YOU?"},
    "http": {"shows": ["handler_config", "secret_headers"], "hides": ["python_callable"],
             "arguments": {"city": "Lisbon", "units": "metric"}, "reads": '"city": "Lisbon"'},
    "form": {"shows": ["handler_config"], "hides": ["python_callable", "secret_headers", "execution"],
             "arguments": {"name": "Ada"}, "reads": "Ada feels good (4/5)."},
    "llm": {"shows": ["handler_config", "secret_headers"], "hides": ["python_callable"],
            "arguments": {"text": "A long text."}, "reads": "A summary."},
    "python": {"shows": ["python_callable"], "hides": ["handler_config", "secret_headers"],
               "arguments": {"message": "hello"}, "reads": "hello"},
}  # fmt: skip
EXAMPLE_KEYS = {
    "template": ["text"],
    "http": ["url", "method", "headers", "parameters", "timeout"],
    "form": ["message", "fields", "text"],
    "llm": ["prompt", "system", "max_tokens", "model_preferences"],
}
NAMES = [f"kf_{kind}" for kind in KINDS] + ["kf_table", "kf_prompt", "kf_plain"]


@pytest.fixture
def cleanup(server: DaphneServer) -> Iterator[None]:
    yield
    django_shell(
        server.env,
        "from mcp_app.models import Tool, Prompt\n"
        f"Tool.objects.filter(tenant__slug='demo', name__in={NAMES!r}).delete()\n"
        f"Prompt.objects.filter(tenant__slug='demo', name__in={NAMES!r}).delete()\n",
    )


def watch_console(page: Page) -> list[str]:
    """Every error on the console or thrown on the page (the site's missing favicon aside: issue 24's polish)."""
    errors: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            errors.append(f"{page.url}: {message.text}")

    page.on("console", heard)
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    return errors


async def config_of(page: Page, field: str) -> Any:
    return json.loads(await page.locator(f"#id_{field}").input_value())


async def person(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"mood": "good", "score": 4})


async def model(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text="A summary."), model="m")


async def test_each_kind_shows_only_its_fields_and_an_example_that_works_once_saved(
    server: DaphneServer, page: Page, cleanup: None, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    errors = watch_console(page)
    await signed_in(page, server)
    for kind, expected in KINDS.items():
        await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
        await page.select_option("#id_tenant", label="demo")
        await page.fill("#id_name", f"kf_{kind}")
        # Another kind first, then this one: the untouched example follows the kind.
        await page.select_option("#id_handler", "http" if kind == "template" else "template")
        await page.select_option("#id_handler", kind)
        for row in expected["shows"]:
            await expect(page.locator(f".form-row.field-{row}")).to_be_visible()
        for row in expected["hides"]:
            await expect(page.locator(f".form-row.field-{row}")).to_be_hidden()
        if kind != "python":  # this kind's own example, not the one of the kind chosen before
            assert set(await config_of(page, "handler_config")) == set(EXAMPLE_KEYS[kind]), kind
        schema = await config_of(page, "input_schema")
        assert set(schema["properties"]) >= {k for k in expected["arguments"] if k != "units"}, (kind, schema)
        if kind == "python":
            assert await page.locator("#id_python_callable").input_value() == "echo"
            assert "Return the message as text" in await body_text(page)
        if kind == "form":  # the field builder shows the form's fields
            builder = page.locator("[data-table-for=handler_config]")
            await expect(builder).to_be_visible()
            await expect(builder.locator("input[data-col=name]").first).to_have_value("mood")
        await shots.take(page, f"add-{kind}")
        async with page.expect_navigation():
            await page.click("input[name=_publish]")
        assert "was added successfully" in await body_text(page), kind

    async with sdk_client(
        server.mcp_url("demo"), "auto", elicitation_callback=person, sampling_callback=model
    ) as client:
        for kind, expected in KINDS.items():
            result = await client.call_tool(f"kf_{kind}", expected["arguments"])
            text = " ".join(getattr(block, "text", "") for block in result.content)
            assert not result.is_error and expected["reads"] in text, (kind, text)
    assert errors == [], errors


async def test_typed_settings_survive_a_change_of_kind(server: DaphneServer, page: Page) -> None:
    errors = watch_console(page)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_handler", "template")
    edited = page.locator("[data-table-for=input_schema] input[data-col=description]").first
    await edited.fill("The person to greet.")
    await page.select_option("#id_handler", "http")
    schema = await config_of(page, "input_schema")
    assert schema["properties"]["name"]["description"] == "The person to greet."  # typed: kept
    assert (await config_of(page, "handler_config"))["method"] == "POST"  # untouched: replaced
    # A schema the table cannot show stays in the JSON view, with a note saying why.
    limited = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    await type_json(page, "output_schema", limited)
    table = page.locator("[data-table-for=output_schema]")
    await table.locator("button.structured-toggle").click()
    await expect(table.locator(".structured-note")).to_contain_text("The table cannot show this value")
    await expect(
        page.locator("[data-json-editor][data-field=output_schema] .json-editor-box")
    ).to_be_visible()
    assert await config_of(page, "output_schema") == limited
    assert errors == [], errors


async def test_the_argument_table_builds_the_input_schema_and_the_tool_uses_it(
    server: DaphneServer, page: Page, cleanup: None, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    errors = watch_console(page)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", "kf_table")
    table = page.locator("[data-table-for=input_schema]")
    for _ in range(await table.locator("button.structured-remove").count()):
        await table.locator("button.structured-remove").first.click()
    await table.locator("button.structured-add").click()
    row = table.locator("tbody tr").last
    await row.locator("[data-col=name]").fill("city")
    await row.locator("[data-col=description]").fill("Where.")
    await row.locator("[data-col=required]").check()
    await table.locator("button.structured-add").click()
    row = table.locator("tbody tr").last
    await row.locator("[data-col=name]").fill("days")
    await row.locator("[data-col=type]").select_option("integer")
    await row.locator("[data-col=default]").fill("3")
    expected = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Where."},
            "days": {"type": "integer", "default": 3},
        },
        "required": ["city"],
    }
    assert await config_of(page, "input_schema") == expected
    # The JSON view is one click away, and shows the same schema.
    await table.locator("button.structured-toggle").click()
    editor = page.locator("[data-json-editor][data-field=input_schema] .json-editor-box")
    await expect(editor).to_be_visible()
    await expect(editor).to_contain_text("days")
    await page.locator("#id_handler_config").evaluate(
        "(t) => t.closest('[data-json-editor]').setJSON({text: '{{ city }} for {{ days }} days'})"
    )
    await shots.take(page, "table")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was added successfully" in await body_text(page)
    async with sdk_client(server.mcp_url("demo"), "auto") as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "kf_table")
        result = await client.call_tool("kf_table", {"city": "Porto"})
    assert tool.input_schema == expected
    assert result.content[0].text == "Porto for 3 days"
    assert errors == [], errors


async def test_the_message_editor_and_argument_table_build_a_prompt_that_prompts_get_renders(
    server: DaphneServer, page: Page, cleanup: None, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    errors = watch_console(page)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/prompt/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", "kf_prompt")
    arguments = page.locator("[data-table-for=arguments]")
    await arguments.locator("button.structured-add").click()
    await arguments.locator("[data-col=name]").fill("topic")
    await arguments.locator("[data-col=required]").check()
    messages = page.locator("[data-table-for=messages]")
    await messages.locator("button.structured-add").click()
    await messages.locator("textarea[data-part=text]").last.fill("Tell me about {{ topic }}.")
    await messages.locator("button.structured-add").click()
    await messages.locator("select[data-part=role]").last.select_option("assistant")
    await messages.locator("select[data-part=type]").last.select_option("resource")
    await messages.locator("input[data-part=uri]").last.fill("demo://readme")
    assert await config_of(page, "messages") == [
        {"role": "user", "content": {"type": "text", "text": "Tell me about {{ topic }}."}},
        {"role": "assistant", "content": {"type": "resource", "uri": "demo://readme"}},
    ]
    await shots.take(page, "prompt")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "was added successfully" in await body_text(page)
    async with sdk_client(server.mcp_url("demo"), "auto") as client:
        got = await client.get_prompt("kf_prompt", {"topic": "tides"})
    assert got.messages[0].content.text == "Tell me about tides."
    assert got.messages[1].content.resource.uri == "demo://readme"
    assert errors == [], errors


async def test_an_error_on_a_row_the_kind_hides_is_shown_and_without_script_the_form_still_works(
    server: DaphneServer, page: Page, cleanup: None
) -> None:
    errors = watch_console(page)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
    await page.select_option("#id_tenant", label="demo")
    await page.fill("#id_name", "kf_plain")
    await page.select_option("#id_handler", "python")
    await page.select_option("#id_python_callable", "")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    row = page.locator(".form-row.field-python_callable")
    await expect(row).to_be_visible()
    await expect(row.locator(".errorlist")).to_have_text("Choose the registered callable this tool runs.")
    # Secret headers typed for http, then the kind changed to template: the row the kind hides still
    # shows its error, and its fieldset with it.
    await page.select_option("#id_handler", "http")
    await page.fill("#id_secret_headers", "not json")
    await page.select_option("#id_handler", "template")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    row = page.locator(".form-row.field-secret_headers")
    await expect(row).to_be_visible()
    await expect(row.locator(".errorlist")).to_contain_text("Invalid JSON")
    await expect(page.locator(".form-row.field-python_callable")).to_be_hidden()
    assert errors == [], errors

    # No script at all: every row shows, the template example is there, and saving it makes a tool.
    async with chromium() as browser:
        context = await browser.new_context(java_script_enabled=False)
        plain = await context.new_page()
        await signed_in(plain, server)
        await plain.goto(f"{server.url}/admin/mcp_app/tool/add/")
        for row_name in ("python_callable", "secret_headers", "handler_config"):
            await expect(plain.locator(f".form-row.field-{row_name}")).to_be_visible()
        await plain.select_option("#id_tenant", label="demo")
        await plain.fill("#id_name", "kf_plain")
        async with plain.expect_navigation():
            await plain.click("input[name=_publish]")
        assert "was added successfully" in await body_text(plain)
        await context.close()
    async with sdk_client(server.mcp_url("demo"), "auto") as client:
        result = await client.call_tool("kf_plain", {"name": "Ada"})
    assert result.content[0].text == "Hello, Ada!"
