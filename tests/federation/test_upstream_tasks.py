"""An upstream tool that runs as a task on its upstream (AMB-199): called task-augmented, followed to its
result, cancelled upstream when our call is, in both eras, against the SDK's server (its `long_job`,
tests/upstreams/task_server.py)."""

from __future__ import annotations

import asyncio

import pytest

from mcp_app.federation import UpstreamError, call_tool, upstream_tasks
from tests.federation.support import target_for, upstream_sees


async def test_a_task_tool_called_as_a_task_is_followed_to_its_result(upstream, era):
    run = f"done-{era}"
    result = await call_tool(
        target_for(upstream), "long_job", {"steps": 3, "delay": 0.05, "run": run}, as_task=True
    )
    assert result["content"][0]["text"] == "job done after 3 steps"
    assert not result.get("isError")
    stats = upstream.stats()
    assert run in stats["completed"] and stats["methods"].get("tasks/get", 0) >= 1


async def test_a_plain_call_the_upstream_refuses_for_want_of_a_task_goes_again_as_one(upstream, era):
    # A pin that does not say so (2026-07-28 lists no execution.taskSupport; an upstream changed its
    # mind): the refusal (-32021 naming the extension; a 2025-11-25 session's -32601) says it.
    run = f"plain-{era}"
    result = await call_tool(target_for(upstream), "long_job", {"steps": 1, "delay": 0.01, "run": run})
    assert result["content"][0]["text"] == "job done after 1 steps"
    assert run in upstream.stats()["completed"]
    assert upstream.stats()["methods"]["tools/call"] >= 2


async def test_cancelling_the_caller_cancels_the_upstream_task(upstream, era):
    run = f"cancel-{era}"
    tasks_before = upstream.stats()["tasks"]
    call = asyncio.create_task(
        call_tool(target_for(upstream), "long_job", {"steps": 400, "delay": 0.05, "run": run}, as_task=True)
    )
    async with asyncio.timeout(10):
        while upstream.stats()["tasks"] == tasks_before:
            await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await upstream_sees(upstream, "cancelled", run)
    assert run not in upstream.stats()["completed"]


async def test_a_caller_cancelling_while_the_upstream_makes_its_task_cancels_that_task(upstream, era):
    # The upstream has made the task but not yet answered with its handle when our call is cancelled.
    run = f"early-{era}"
    tasks_before = upstream.stats()["tasks"]
    arguments = {"steps": 400, "delay": 0.05, "run": run, "answer_after": 0.5}
    call = asyncio.create_task(call_tool(target_for(upstream), "long_job", arguments, as_task=True))
    async with asyncio.timeout(10):
        while upstream.stats()["tasks"] == tasks_before:
            await asyncio.sleep(0.02)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await upstream_sees(upstream, "cancelled", run)


async def test_the_deadline_cancels_the_upstream_task(upstream, era):
    run = f"deadline-{era}"
    target = target_for(upstream, timeout_seconds=1.0)
    with pytest.raises(UpstreamError) as caught:
        await call_tool(target, "long_job", {"steps": 400, "delay": 0.05, "run": run}, as_task=True)
    assert "did not answer the call within 1 seconds" in caught.value.message
    await upstream_sees(upstream, "cancelled", run)


def test_how_a_pinned_definition_says_the_upstream_runs_a_tool():
    assert upstream_tasks.runs_as_task({"execution": {"taskSupport": "required"}}) == "required"
    assert upstream_tasks.runs_as_task({"execution": {"taskSupport": "optional"}}) == "optional"
    assert upstream_tasks.runs_as_task({"execution": {"taskSupport": "sometimes"}}) == "forbidden"
    assert upstream_tasks.runs_as_task({"name": "x"}) == "forbidden"
    assert upstream_tasks.runs_as_task(None) == "forbidden"
