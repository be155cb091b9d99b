"""The handler registry: kinds, choices, and the one funnel that turns failures into error results."""

from __future__ import annotations

import asyncio
import logging

import pytest
from django.core.exceptions import ValidationError

from mcp_app.core.errors import GENERIC_TOOL_ERROR, ToolError
from mcp_app.handlers import registry
from mcp_app.handlers.python import register
from tests.handlers.support import make_template, make_tool


@register("test_crash")
async def _crash(ctx, arguments):
    raise RuntimeError("secret internals: /srv/app/db.sqlite3 password=hunter2")


@register("test_tool_error")
async def _tool_error(ctx, arguments):
    raise ToolError("The city is unknown.")


@register("test_slow")
async def _slow(ctx, arguments):
    await asyncio.sleep(10)
    return "late"


@register("test_bad_shape")
async def _bad_shape(ctx, arguments):
    return 42


def test_kinds_list_template_http_python_form_llm_and_upstream_as_admin_choices():
    kinds = ["template", "http", "python", "form", "llm", "upstream"]
    assert set(registry.KINDS) == set(kinds)
    assert [value for value, _label in registry.kind_choices()] == kinds
    assert registry.load_kind("template").run is not None


async def test_tool_error_becomes_an_is_error_result_with_its_message(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "test_tool_error"}), {})
    assert result == {"content": [{"type": "text", "text": "The city is unknown."}], "isError": True}


async def test_unexpected_exception_is_logged_and_answered_without_internals(ctx, caplog):
    with caplog.at_level(logging.ERROR, logger="mcp_app.handlers.registry"):
        result = await registry.run_inline(ctx, make_tool("python", {"callable": "test_crash"}), {})
    assert result == {"content": [{"type": "text", "text": GENERIC_TOOL_ERROR}], "isError": True}
    assert "hunter2" not in str(result)
    assert any(record.exc_info for record in caplog.records)


async def test_handler_returning_a_wrong_shape_is_an_internal_error_result(ctx):
    result = await registry.run_inline(ctx, make_tool("python", {"callable": "test_bad_shape"}), {})
    assert result == {"content": [{"type": "text", "text": GENERIC_TOOL_ERROR}], "isError": True}


async def test_tool_running_past_its_timeout_gets_an_error_result(ctx):
    tool = make_tool("python", {"callable": "test_slow"}, timeout_seconds=0.1)
    result = await asyncio.wait_for(registry.run_inline(ctx, tool, {}), timeout=3)
    assert result == {
        "content": [{"type": "text", "text": "The tool did not finish within 0.1 seconds."}],
        "isError": True,
    }


async def test_unknown_kind_is_an_error_result_not_a_crash(ctx):
    result = await registry.run_inline(ctx, make_tool("shell", {}), {})
    assert result == {"content": [{"type": "text", "text": "Unknown handler kind 'shell'."}], "isError": True}


async def test_cancellation_propagates_instead_of_becoming_a_result(ctx):
    task = asyncio.create_task(registry.run_inline(ctx, make_tool("python", {"callable": "test_slow"}), {}))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=2)


def test_validate_config_rejects_unknown_kinds_and_non_objects():
    with pytest.raises(ValidationError, match="Unknown handler kind 'shell'"):
        registry.validate_config("shell", {})
    with pytest.raises(ValidationError, match="must be a JSON object"):
        registry.validate_config("template", ["x"])


async def test_http_kind_cannot_back_a_resource_template(ctx):
    with pytest.raises(registry.HandlerError, match="cannot produce contents"):
        await registry.read_template(ctx, make_template("http", {}), "x://1", {})
    with pytest.raises(ValidationError, match="support the handler kinds"):
        registry.validate_template_config("http", {})
