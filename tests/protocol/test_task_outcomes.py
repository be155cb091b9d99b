"""A tool's protocol-level failure ends its task `failed` (AMB-285), and a tool's own questions are asked
before its 2026-07-28 task is made (AMB-286): the conformance scenarios `sep-2663-tasks-get-status-failed`
and `tasks-mrtr-composition`, through the dispatcher with python tools (the http kind's events that say
the same: tests/handlers/test_http_stream.py; through Daphne: tests/e2e/test_conformance_tools.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ProtocolError
from mcp_app.handlers.python import register
from mcp_app.models import Tool, ToolRun
from mcp_app.protocol import tasks
from tests.protocol.support import ctx_for, error_of, finished, result_of

MODERN = "2026-07-28"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TASKS_AND_FORMS = {"elicitation": {}, "extensions": {tasks.EXTENSION: {}}}
RUNS: list[str] = []


@register("test_protocol_failure")
async def protocol_failure(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    raise ProtocolError(-32603, "The job broke.", {"why": "on purpose"})


@register("test_ask_then_task")
async def ask_then_task(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    RUNS.append("run")
    answer = await ctx.elicit("What is your name?", NAME_FORM)
    await ctx.as_task()
    RUNS.append("as a task")
    return {"content": [{"type": "text", "text": f"Hello, {answer['content']['name']}!"}]}


@pytest.fixture(autouse=True)
def in_process(settings: Any) -> None:
    settings.MCP_BACKGROUND_TOOLS = "inline"


@pytest.fixture
def tools(transactional_db: Any, tenant_a: Any) -> Any:
    Tool.objects.create(
        tenant=tenant_a,
        name="breaks",
        handler="python",
        handler_config={"callable": "test_protocol_failure"},
        execution="background",
        task_support="optional",
    )
    for name, support in (("greets_later", "required"), ("greets_maybe_later", "optional")):
        Tool.objects.create(
            tenant=tenant_a,
            name=name,
            handler="python",
            handler_config={"callable": "test_ask_then_task", "asks_before_task": True},
            task_support=support,
        )
    RUNS.clear()
    return tenant_a


# --- A protocol error ends a task failed (AMB-285) ----------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
async def test_a_plain_call_of_a_tool_raising_a_protocol_error_answers_that_json_rpc_error(tools, version):
    ctx = await ctx_for(tools, version, session=None if version == MODERN else True)
    error = await error_of(ctx, "tools/call", {"name": "breaks", "arguments": {}})
    assert error == {"code": -32603, "message": "The job broke.", "data": {"why": "on purpose"}}


async def test_a_2025_11_25_task_whose_tool_raises_a_protocol_error_ends_failed_with_it(tools):
    ctx = await ctx_for(tools)
    created = await result_of(ctx, "tools/call", {"name": "breaks", "arguments": {}, "task": {}})
    task = await finished(ctx, created["task"]["taskId"])
    assert task["status"] == "failed" and task["statusMessage"] == "The job broke."
    assert await error_of(ctx, "tasks/result", {"taskId": task["taskId"]}) == {
        "code": -32603,
        "message": "The job broke.",
        "data": {"why": "on purpose"},
    }
    run = await ToolRun.objects.aget(task_id=task["taskId"])
    assert run.status == ToolRun.Status.FAILED


async def test_a_2026_07_28_task_whose_tool_raises_a_protocol_error_is_failed_with_the_error_and_no_result(
    tools,
):
    ctx = await ctx_for(tools, MODERN, session=None, client_capabilities=TASKS_AND_FORMS)
    created = await result_of(ctx, "tools/call", {"name": "breaks", "arguments": {}})
    assert created["resultType"] == "task"
    task = await finished(ctx, created["taskId"])
    assert task["status"] == "failed"
    assert task["error"] == {"code": -32603, "message": "The job broke.", "data": {"why": "on purpose"}}
    assert "result" not in task


# --- Questions before the task (AMB-286) ----------------------------------------------------------------


async def test_a_task_tools_question_is_asked_in_rounds_and_its_answer_reaches_the_task_that_runs_it(tools):
    ctx = await ctx_for(tools, MODERN, session=None, client_capabilities=TASKS_AND_FORMS)
    call = {"name": "greets_later", "arguments": {}}
    first = await result_of(ctx, "tools/call", call)
    assert first["resultType"] == "input_required" and "taskId" not in first
    [(key, question)] = first["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert await ToolRun.objects.filter(tool_name="greets_later").acount() == 0  # no task yet
    answer = {"action": "accept", "content": {"name": "Alice"}}
    retry = {**call, "requestState": first["requestState"], "inputResponses": {key: answer}}
    created = await result_of(ctx, "tools/call", retry)
    assert created["resultType"] == "task" and created["taskId"]
    assert "requestState" not in created and "inputRequests" not in created
    task = await finished(ctx, created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "Hello, Alice!"
    # Round one asked; round two asked again (answered) and said `as_task`; the task ran it again.
    assert RUNS == ["run", "run", "run", "as a task"]


async def test_without_the_tasks_extension_the_same_tool_answers_in_rounds_as_any_call(tools):
    ctx = await ctx_for(tools, MODERN, session=None, client_capabilities={"elicitation": {}})
    call = {"name": "greets_maybe_later", "arguments": {}}
    first = await result_of(ctx, "tools/call", call)
    [key] = first["inputRequests"]
    answer = {"action": "accept", "content": {"name": "Bo"}}
    retry = {**call, "requestState": first["requestState"], "inputResponses": {key: answer}}
    result = await result_of(ctx, "tools/call", retry)
    assert "resultType" not in result or result["resultType"] == "complete"
    assert result["content"][0]["text"] == "Hello, Bo!"
    assert RUNS == ["run", "run", "as a task"]  # `as_task` returned at once
