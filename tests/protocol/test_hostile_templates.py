"""A hostile template ends with a clear error within its bound, for tools, prompts and resources (AMB-97/98)."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async

from mcp_app.models import Prompt, ResourceTemplate, Tool
from mcp_app.protocol.jsonrpc import INTERNAL_ERROR
from tests.handlers.test_template_budget import SILENT_LOOPS
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.usefixtures("render_processes")

# 10^9 characters if nothing stopped it.
HUGE_OUTPUT = "{% for a in s %}{% for b in s %}{{ s }}{% endfor %}{% endfor %}"


@pytest.mark.parametrize(
    ("render_seconds", "timeout", "message"),
    [
        (30, 1, "The tool did not finish within 1 seconds."),  # the tool's timeout first
        (1, 60, "The template did not finish rendering within 1 seconds."),  # the render bound first
    ],
)
async def test_a_hostile_template_tool_is_an_is_error_at_the_first_of_its_bounds(
    demo_a, settings, render_seconds, timeout, message
):
    settings.MCP_TEMPLATE_SECONDS = render_seconds
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="hostile",
        handler="template",
        handler_config={"text": SILENT_LOOPS},
        timeout_seconds=timeout,
    )
    started = time.monotonic()
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "hostile", "arguments": {}})
    assert result["isError"] is True
    assert result["content"][0]["text"] == message
    # Long before the other bound (30 s, 60 s), with room for a machine loaded by the rest of the suite
    # (2.9 s seen for the 1 s render bound under two workers): the message says which bound fired.
    assert time.monotonic() - started < 15


async def test_structured_content_templates_are_bounded_too(demo_a, settings):
    settings.MCP_TEMPLATE_SECONDS = 1
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="hostile",
        handler="template",
        handler_config={"structured": {"a": "fine", "b": SILENT_LOOPS}},
        timeout_seconds=60,
    )
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "hostile", "arguments": {}})
    assert result["isError"] is True
    assert "did not finish rendering within 1 seconds" in result["content"][0]["text"]


async def test_output_past_the_cap_stops_the_render_with_a_clear_error(demo_a):
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="huge",
        handler="template",
        handler_config={"text": HUGE_OUTPUT},
        timeout_seconds=30,
    )
    started = time.monotonic()
    result = await result_of(make_ctx(demo_a), "tools/call", {"name": "huge", "arguments": {"s": "x" * 1000}})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "The rendered text is longer than 1048576 characters; rendering was stopped."
    )
    assert time.monotonic() - started < 5


async def test_a_hostile_prompt_is_an_internal_error_within_the_render_bound(demo_a, settings):
    settings.MCP_TEMPLATE_SECONDS = 1
    await sync_to_async(Prompt.objects.create)(
        tenant=demo_a,
        name="hostile",
        messages=[{"role": "user", "content": {"type": "text", "text": SILENT_LOOPS}}],
    )
    started = time.monotonic()
    error = await error_of(make_ctx(demo_a), "prompts/get", {"name": "hostile"})
    assert error["code"] == INTERNAL_ERROR
    assert error["message"] == (
        "Prompt 'hostile' could not be rendered: The template did not finish rendering within 1 seconds."
    )
    assert time.monotonic() - started < 2.5


async def test_a_hostile_resource_template_is_an_internal_error_within_the_render_bound(demo_a, settings):
    settings.MCP_TEMPLATE_SECONDS = 1
    await sync_to_async(ResourceTemplate.objects.create)(
        tenant=demo_a,
        uri_template="hostile://{x}",
        name="hostile",
        handler="template",
        handler_config={"text": SILENT_LOOPS},
    )
    error = await error_of(make_ctx(demo_a), "resources/read", {"uri": "hostile://1"})
    assert error["code"] == INTERNAL_ERROR
    assert error["message"] == (
        "The resource could not be read: The template did not finish rendering within 1 seconds."
    )
