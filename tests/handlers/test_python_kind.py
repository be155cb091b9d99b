"""The python kind: operator-registered callables, and the demo callables."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError

from mcp_app.handlers import python, registry
from mcp_app.handlers.python import register
from tests.handlers.support import make_template, make_tool


@register("test_sync_thread")
def _sync_thread(ctx, arguments):
    return {
        "thread": threading.current_thread().name,
        "main": threading.current_thread() is threading.main_thread(),
    }


@register("test_blocks")
async def _blocks(ctx, arguments):
    return [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]


@register("test_text")
async def _text(ctx, arguments):
    return f"hi {arguments['who']}"


@register("test_bytes")
async def _bytes(ctx, arguments):
    return b"\x00\x01"


def test_registered_names_include_the_demo_callables_from_the_configured_modules():
    assert {"echo", "add", "count_slowly", "user_profile"} <= set(python.registered_names())


def test_registering_another_function_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):

        @register("echo")
        async def other(ctx, arguments):
            return ""


async def test_echo_returns_text_and_structured_content(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "echo"}), {"message": "hi"})
    assert result == {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"echo": "hi"}}


async def test_add_returns_the_sum(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "add"}), {"a": 2, "b": 40})
    assert result == {"content": [{"type": "text", "text": "42"}], "structuredContent": {"sum": 42}}


async def test_add_with_bad_arguments_is_a_tool_error_the_model_can_read(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "add"}), {"a": "2", "b": 1})
    assert result == {"content": [{"type": "text", "text": "'a' and 'b' must be integers."}], "isError": True}


async def test_sync_callable_runs_off_the_event_loop_thread(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "test_sync_thread"}), {})
    assert result["structuredContent"]["main"] is False


async def test_string_and_list_returns_become_content_blocks(ctx):
    assert await registry.run_inline(ctx, make_tool("python", {"callable": "test_text"}), {"who": "x"}) == {
        "content": [{"type": "text", "text": "hi x"}]
    }
    assert (await registry.run_inline(ctx, make_tool("python", {"callable": "test_blocks"}), {}))["content"][
        1
    ] == {
        "type": "text",
        "text": "two",
    }


async def test_unknown_callable_is_an_error_result_at_run_and_a_validation_error_in_admin(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "nope"}), {})
    assert result == {
        "content": [{"type": "text", "text": "No python handler is registered as 'nope'."}],
        "isError": True,
    }
    with pytest.raises(ValidationError, match="must name a registered python handler"):
        registry.validate_config("python", {"callable": "nope"})
    registry.validate_config("python", {"callable": "echo"})


async def test_ut21_count_slowly_reports_progress_and_log_messages_every_step(ctx, recorder):
    tool = make_tool("python", {"callable": "count_slowly"})
    result = await registry.run_inline(ctx, tool, {"n": 3, "delay": 0})
    assert result["structuredContent"] == {"count": 3}
    progress = [m["params"] for m in recorder.messages if m["method"] == "notifications/progress"]
    assert [(p["progress"], p["total"], p["progressToken"]) for p in progress] == [
        (1, 3, "tok-1"),
        (2, 3, "tok-1"),
        (3, 3, "tok-1"),
    ]
    logs = [m["params"] for m in recorder.messages if m["method"] == "notifications/message"]
    assert [entry["data"] for entry in logs] == ["count 1 of 3", "count 2 of 3", "count 3 of 3"]
    assert all(entry["level"] == "info" and entry["logger"] == "count_slowly" for entry in logs)


async def test_count_slowly_stops_promptly_when_cancelled(ctx, recorder):
    cancelled = asyncio.Event()
    tool = make_tool("python", {"callable": "count_slowly"})
    task = asyncio.create_task(
        registry.run_inline(replace(ctx, cancelled=cancelled), tool, {"n": 50, "delay": 5})
    )
    await asyncio.sleep(0)  # let the tool start waiting
    cancelled.set()
    result = await asyncio.wait_for(task, timeout=2)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Cancelled after 0 of 50."


async def test_count_slowly_refuses_n_above_the_maximum(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "count_slowly"}), {"n": 51})
    assert result["isError"] is True and "'n' must be a number from 1 to 50" in result["content"][0]["text"]


async def test_python_resource_template_reader_returns_json_text_or_blob(ctx):
    contents = await registry.read_template(
        ctx, make_template("python", {"callable": "user_profile"}), "demo://users/7/profile", {"user_id": "7"}
    )
    assert contents == [
        {
            "uri": "demo://users/7/profile",
            "mimeType": "application/json",
            "text": '{"user_id": "7", "name": "User 7"}',
        }
    ]
    blob = await registry.read_template(
        ctx, make_template("python", {"callable": "test_bytes"}, "application/x"), "x://1", {}
    )
    assert blob == [{"uri": "x://1", "mimeType": "application/x", "blob": "AAE="}]
