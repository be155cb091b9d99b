"""tools/list and tools/call (checklist §5.2)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async

from mcp_app.core.context import SessionState
from mcp_app.handlers import registry
from mcp_app.models import Tool
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from mcp_app.protocol.ratelimit import RATE_LIMITED
from tests.protocol.support import call, error_of, result_of
from tests.support import make_ctx


async def test_tl01_tools_list_returns_the_enabled_tools_sorted_by_name(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/list")
    names = [t["name"] for t in result["tools"]]
    assert names == sorted(names)
    assert "echo" in names and "greet" in names
    assert "disabled_tool" not in names
    assert "nextCursor" not in result


async def test_tl02_a_tool_carries_its_definition(demo_a):
    tools = {t["name"]: t for t in (await result_of(make_ctx(demo_a, "2025-06-18"), "tools/list"))["tools"]}
    assert tools["echo"] == {
        "name": "echo",
        "title": "Echo",
        "description": "Echo a message.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
        "outputSchema": {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]},
        "_meta": {"example.com/tier": "free"},
    }
    assert tools["greet"]["annotations"] == {"readOnlyHint": True}


async def test_tl05_a_successful_call_returns_content_and_structured_content(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    assert result == {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"echo": "hi"}}


async def test_tl05_a_template_tool_renders_its_arguments(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "greet", "arguments": {"name": "Ada"}})
    assert result == {"content": [{"type": "text", "text": "Hello, Ada!"}]}


async def test_tl06_an_unknown_tool_is_invalid_params(demo_a):
    error = await error_of(make_ctx(demo_a), "tools/call", {"name": "nope", "arguments": {}})
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Unknown tool: nope"


async def test_tl06_a_disabled_tool_is_unknown(demo_a):
    error = await error_of(make_ctx(demo_a), "tools/call", {"name": "disabled_tool"})
    assert error["code"] == INVALID_PARAMS


@pytest.mark.parametrize(
    "params", [{}, {"name": 5}, {"name": "echo", "arguments": ["hi"]}, {"name": "echo", "arguments": "hi"}]
)
async def test_tl04_a_call_without_a_name_or_with_non_object_arguments_is_invalid_params(demo_a, params):
    error = await error_of(make_ctx(demo_a), "tools/call", params)
    assert error["code"] == INVALID_PARAMS


async def test_tl07_lg06_a_tool_failure_is_an_is_error_result_without_internals(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "boom"})
    assert result["isError"] is True
    assert result["content"][0]["type"] == "text"
    assert "hunter2" not in json.dumps(result)


async def test_tl07_a_business_error_reaches_the_model_as_an_is_error_result(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "refuse"})
    assert result == {"content": [{"type": "text", "text": "The order 42 does not exist."}], "isError": True}


async def test_amb16_arguments_failing_the_input_schema_give_an_is_error_result_naming_the_problem(demo_a):
    result = await result_of(
        make_ctx(demo_a), "tools/call", {"name": "add", "arguments": {"a": 1, "b": "two"}}
    )
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "Invalid arguments for tool 'add'" in text
    assert "at b:" in text and "'two' is not of type 'integer'" in text


async def test_tl13_a_missing_required_argument_is_reported_to_the_model(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "echo"})
    assert result["isError"] is True
    assert "'message' is a required property" in result["content"][0]["text"]


async def test_tl13_a_huge_invalid_argument_is_not_echoed_unbounded(demo_a):
    huge = "x" * 200_000
    result = await result_of(
        make_ctx(demo_a), "tools/call", {"name": "add", "arguments": {"a": huge, "b": 1}}
    )
    assert result["isError"] is True
    assert len(result["content"][0]["text"]) < 3000


async def test_amb17_a_schema_naming_draft_07_is_validated_with_draft_07(demo_a):
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="pair",
        input_schema={
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}},
        },
        handler="template",
        handler_config={"text": "ok"},
    )
    ctx = make_ctx(demo_a)
    good = await result_of(ctx, "tools/call", {"name": "pair", "arguments": {"pair": ["a", 1]}})
    bad = await result_of(ctx, "tools/call", {"name": "pair", "arguments": {"pair": ["a", "b"]}})
    assert good == {"content": [{"type": "text", "text": "ok"}]}
    assert bad["isError"] is True and "at pair/1" in bad["content"][0]["text"]


async def test_amb17_a_schema_without_dialect_is_validated_as_2020_12(demo_a):
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="tuple",
        input_schema={
            "type": "object",
            "properties": {
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
            },
        },
        handler="template",
        handler_config={"text": "ok"},
    )
    bad = await result_of(
        make_ctx(demo_a), "tools/call", {"name": "tuple", "arguments": {"pair": ["a", "b"]}}
    )
    assert bad["isError"] is True


async def test_a_tool_whose_input_schema_is_broken_reports_misconfiguration(demo_a):
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="broken_schema",
        input_schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        handler="template",
        handler_config={"text": "ok"},
    )
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "broken_schema", "arguments": {"a": 1}})
    assert result["isError"] is True
    assert "misconfigured" in result["content"][0]["text"]


@pytest.fixture
def schema_host():
    """A local server that counts the requests a schema reference would make to it."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_address[1]}", hits=hits)
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("which", ["input_schema", "output_schema"])
async def test_a_schema_reference_outside_the_schema_is_never_fetched_and_reports_misconfiguration(
    demo_a, schema_host, which
):
    # AMB-117: refused at save now; a row saved before (here: written without full_clean) made
    # jsonschema's default registry GET the URL from the server on every call.
    field = "message" if which == "input_schema" else "echo"  # the argument, or the echo's output
    schema = {"type": "object", "properties": {field: {"$ref": f"{schema_host.url}/secret"}}}
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a, name="remote_ref", handler="python", handler_config={"callable": "echo"}, **{which: schema}
    )
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "remote_ref", "arguments": {"message": "x"}})
    assert result["isError"] is True
    assert "misconfigured" in result["content"][0]["text"]
    assert schema_host.hits == []


async def test_tl08_structured_content_conforming_to_the_output_schema_is_returned(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    assert result == {"content": [{"type": "text", "text": "x"}], "structuredContent": {"echo": "x"}}


async def test_tl08_amb15_structured_content_breaking_the_output_schema_becomes_an_is_error_result(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "wrong_output"})
    assert result["isError"] is True
    assert "structuredContent" not in result
    text = result["content"][0]["text"]
    assert "does not match its output schema" in text and "at sum" in text


async def test_tl09_structured_content_is_mirrored_as_json_text_when_the_handler_gave_no_content(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "structured_only"})
    assert result["structuredContent"] == {"sum": 3}
    assert json.loads(result["content"][0]["text"]) == {"sum": 3}


async def test_tl09_older_clients_get_the_structured_output_as_text_only(demo_a):
    result = await result_of(make_ctx(demo_a, "2025-03-26"), "tools/call", {"name": "structured_only"})
    assert result == {"content": [{"type": "text", "text": '{"sum": 3}'}]}


async def test_a_tool_running_past_its_timeout_gives_an_is_error_result(demo_a):
    # count_slowly has timeout_seconds=1 and would need 3 seconds here.
    result = await result_of(
        make_ctx(demo_a), "tools/call", {"name": "count_slowly", "arguments": {"n": 3, "delay": 1}}
    )
    assert result["isError"] is True
    assert "1 seconds" in result["content"][0]["text"]


async def test_a_handler_that_hangs_is_cut_at_the_tool_timeout_with_an_is_error_result(demo_a, monkeypatch):
    async def stuck(ctx, tool, arguments):
        await asyncio.sleep(30)

    monkeypatch.setattr(registry, "load_kind", lambda name: SimpleNamespace(run=stuck))
    result = await asyncio.wait_for(
        result_of(make_ctx(demo_a), "tools/call", {"name": "count_slowly", "arguments": {}}), timeout=10
    )
    assert result == {
        "content": [{"type": "text", "text": "The tool did not finish within 1 seconds."}],
        "isError": True,
    }


async def test_tl13_tool_calls_are_rate_limited_per_session(demo_a, settings):
    settings.MCP_TOOL_CALLS_PER_MINUTE = 60
    settings.MCP_TOOL_CALLS_BURST = 3
    ctx = make_ctx(demo_a)
    for _ in range(3):
        await result_of(ctx, "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    reply = await call(ctx, "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    assert reply["error"]["code"] == RATE_LIMITED
    assert 0 < reply["error"]["data"]["retryAfter"] <= 1.0
    # Another session of the same tenant has its own bucket.
    other = make_ctx(
        demo_a, session=SessionState(id="sess-2", tenant_id=demo_a.id, protocol_version="2025-11-25")
    )
    await result_of(other, "tools/call", {"name": "echo", "arguments": {"message": "x"}})


async def test_tl13_sessionless_2026_callers_are_limited_per_user_else_per_address(demo_a, settings):
    settings.MCP_TOOL_CALLS_PER_MINUTE = 60
    settings.MCP_TOOL_CALLS_BURST = 2
    echo = {"name": "echo", "arguments": {"message": "x"}}

    def modern(**kwargs):
        return make_ctx(demo_a, version="2026-07-28", session=None, **kwargs)

    for _ in range(2):
        await result_of(modern(client_address="10.0.0.1"), "tools/call", echo)
    reply = await call(modern(client_address="10.0.0.1"), "tools/call", echo)
    assert reply["error"]["code"] == RATE_LIMITED
    # Another address, or a signed-in user, is not throttled by that caller.
    await result_of(modern(client_address="10.0.0.2"), "tools/call", echo)
    await result_of(modern(client_address="10.0.0.1", user_id=7), "tools/call", echo)


@pytest.fixture
def defaults_tools(transactional_db, tenant_a):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "world"},
            "n": {"type": "integer", "default": 2},
            "delay": {"type": "number", "default": 0},
        },
    }
    Tool.objects.create(
        tenant=tenant_a,
        name="hello",
        input_schema=schema,
        handler="template",
        handler_config={"text": "Hello, {{ name }}!"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="count",
        input_schema=schema,
        handler="python",
        handler_config={"callable": "count_slowly"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="count_later",
        input_schema=schema,
        handler="python",
        handler_config={"callable": "count_slowly"},
        execution="background",
    )
    return tenant_a


async def test_a_template_tool_gets_the_schema_default_of_a_missing_argument(defaults_tools):
    result = await result_of(make_ctx(defaults_tools), "tools/call", {"name": "hello", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "Hello, world!"}]


async def test_a_python_tool_gets_the_schema_default_of_a_missing_argument(defaults_tools):
    result = await result_of(make_ctx(defaults_tools), "tools/call", {"name": "count", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "Counted to 2."}]  # its own default is 3


async def test_an_argument_the_caller_gives_wins_over_the_schema_default(defaults_tools):
    ctx = make_ctx(defaults_tools)
    result = await result_of(ctx, "tools/call", {"name": "hello", "arguments": {"name": "Ada"}})
    assert result["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    result = await result_of(ctx, "tools/call", {"name": "count", "arguments": {"n": 4}})
    assert result["content"] == [{"type": "text", "text": "Counted to 4."}]


async def test_a_background_tool_gets_the_schema_default_of_a_missing_argument(defaults_tools, settings):
    # count_in_background's case: the defaults are applied before the choice of where the tool runs,
    # so they travel with the arguments. No worker here: the background path runs in-process, as
    # without a broker (tests/e2e/test_demo_tools.py calls it on a real worker).
    settings.MCP_BACKGROUND_TOOLS = "inline"
    ctx = make_ctx(defaults_tools)
    result = await result_of(ctx, "tools/call", {"name": "count_later", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "Counted to 2."}]
    result = await result_of(ctx, "tools/call", {"name": "count_later", "arguments": {"n": 3}})
    assert result["content"] == [{"type": "text", "text": "Counted to 3."}]
