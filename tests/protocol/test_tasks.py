"""Tasks (protocol/tasks.py, AMB-47): 2025-11-25 task-augmented calls and the 2026-07-28 extension.

Background tools run in this process here (MCP_BACKGROUND_TOOLS inline); the same runs on a real
Celery worker are in tests/e2e/test_tasks.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_app import catalog as catalogs
from mcp_app.background import runs
from mcp_app.core.context import RequestContext
from mcp_app.models import Tool, ToolRun
from mcp_app.protocol import asking, task_input, tasks
from mcp_app.protocol.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from tests.protocol.support import counting_background_tool, ctx_for, error_of, finished, result_of

MODERN = "2026-07-28"
EXTENSION_CAPS = {"extensions": {tasks.EXTENSION: {}}}


@pytest.fixture(autouse=True)
def in_process(settings: Any) -> None:
    """No worker runs beside these tests, even where REDIS_URL would send background tools to one."""
    settings.MCP_BACKGROUND_TOOLS = "inline"


@pytest.fixture(autouse=True)
def count_in_background(demo_a: Any) -> Tool:
    """The demo's background counter (its task support left automatic: optional)."""
    return counting_background_tool(demo_a, "count_in_background")


def count(n: int = 2, delay: float = 0.01, **extra: Any) -> dict[str, Any]:
    return {"name": "count_in_background", "arguments": {"n": n, "delay": delay}, **extra}


# --- 2025-11-25 -----------------------------------------------------------------------------------


async def test_a_2025_11_25_session_is_offered_tasks_only_where_a_tool_supports_them(demo_a, demo_b):
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    caps = (await result_of(await ctx_for(demo_a, session=None), "initialize", init))["capabilities"]
    assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    older = {**init, "protocolVersion": "2025-06-18"}
    assert (
        "tasks"
        not in (await result_of(await ctx_for(demo_a, session=None), "initialize", older))["capabilities"]
    )
    assert (
        "tasks"
        not in (await result_of(await ctx_for(demo_b, session=None), "initialize", init))["capabilities"]
    )


async def test_tools_list_tells_2025_11_25_clients_each_tools_task_support(demo_a):
    await sync_to_async(Tool.objects.filter(tenant=demo_a, name="add").update)(task_support="required")
    listed = {t["name"]: t for t in (await result_of(await ctx_for(demo_a), "tools/list"))["tools"]}
    assert listed["count_in_background"]["execution"] == {"taskSupport": "optional"}
    assert listed["echo"]["execution"] == {"taskSupport": "forbidden"}
    assert listed["add"]["execution"] == {"taskSupport": "required"}
    modern = await result_of(await ctx_for(demo_a, MODERN, session=None), "tools/list")
    assert all("execution" not in t for t in modern["tools"])


async def test_a_task_augmented_call_answers_a_task_at_once_and_its_result_later(demo_a):
    ctx = await ctx_for(demo_a)
    created = await result_of(ctx, "tools/call", count(task={"ttl": 60_000}))
    task = created["task"]
    assert task["status"] == "working" and task["ttl"] == 60_000 and task["pollInterval"] == 1000
    assert len(task["taskId"]) >= 32 and task["createdAt"].endswith("Z")
    result = await result_of(ctx, "tasks/result", {"taskId": task["taskId"]})
    assert result["content"][0]["text"].startswith("Counted to 2")
    assert result["_meta"][tasks.RELATED_TASK] == {"taskId": task["taskId"]}
    assert (await result_of(ctx, "tasks/get", {"taskId": task["taskId"]}))["status"] == "completed"
    run = await sync_to_async(ToolRun.objects.get)(task_id=task["taskId"])
    assert run.status == ToolRun.Status.DONE


async def test_the_tenants_task_ttl_caps_the_clients(demo_a):
    demo_a.task_ttl_seconds = 10
    await sync_to_async(demo_a.save)()
    created = await result_of(await ctx_for(demo_a), "tools/call", count(task={"ttl": 3_600_000}))
    assert created["task"]["ttl"] == 10_000


async def test_a_tool_whose_task_support_is_forbidden_refuses_a_task_and_a_required_one_a_plain_call(demo_a):
    await sync_to_async(Tool.objects.filter(tenant=demo_a, name="count_in_background").update)(
        task_support="required"
    )
    ctx = await ctx_for(demo_a)
    plain = await error_of(ctx, "tools/call", count())
    assert plain["code"] == -32601
    forbidden = await error_of(ctx, "tools/call", {"name": "echo", "arguments": {"message": "m"}, "task": {}})
    assert forbidden["code"] == -32601


async def test_a_session_before_2025_11_25_has_its_task_field_ignored(demo_a):
    result = await result_of(await ctx_for(demo_a, "2025-06-18"), "tools/call", count(task={}))
    assert "task" not in result and result["content"][0]["text"].startswith("Counted to 2")


async def test_an_is_error_result_makes_a_failed_task_whose_result_is_that_result(demo_a):
    ctx = await ctx_for(demo_a)
    await sync_to_async(Tool.objects.filter(tenant=demo_a, name="boom").update)(task_support="optional")
    created = await result_of(ctx, "tools/call", {"name": "boom", "arguments": {}, "task": {}})
    task = await finished(ctx, created["task"]["taskId"])
    assert task["status"] == "failed" and task["statusMessage"].startswith("Tool execution failed")
    result = await result_of(ctx, "tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is True


async def test_cancelling_a_running_task_stops_it_and_a_second_cancel_is_refused(demo_a):
    ctx = await ctx_for(demo_a)
    task_id = (await result_of(ctx, "tools/call", count(n=50, delay=0.2, task={})))["task"]["taskId"]
    await asyncio.sleep(0.3)
    cancelled = await result_of(ctx, "tasks/cancel", {"taskId": task_id})
    assert cancelled["status"] == "cancelled"
    await asyncio.sleep(0.3)
    assert (await result_of(ctx, "tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    again = await error_of(ctx, "tasks/cancel", {"taskId": task_id})
    assert again == {"code": -32602, "message": "Cannot cancel task: already in terminal status 'cancelled'"}
    run = await sync_to_async(ToolRun.objects.get)(task_id=task_id)
    assert run.status == ToolRun.Status.CANCELLED


async def test_tasks_list_pages_through_the_callers_own_tasks(demo_a, monkeypatch):
    monkeypatch.setattr(tasks, "PAGE_SIZE", 2)
    mine, theirs = await ctx_for(demo_a), await ctx_for(demo_a)
    theirs = dataclasses.replace(theirs, session=dataclasses.replace(theirs.session, id="sess-2"))
    ids = [(await result_of(mine, "tools/call", count(task={})))["task"]["taskId"] for _ in range(3)]
    await result_of(theirs, "tools/call", count(task={}))
    first = await result_of(mine, "tasks/list")
    second = await result_of(mine, "tasks/list", {"cursor": first["nextCursor"]})
    assert "nextCursor" not in second
    assert [t["taskId"] for t in first["tasks"] + second["tasks"]] == ids[::-1]
    assert (await error_of(mine, "tasks/list", {"cursor": "forged"}))["code"] == -32602


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
async def test_another_session_user_or_client_gets_not_found_for_a_task_like_an_unknown_id(
    demo_a, method, alice, bob
):
    owner = await ctx_for(demo_a, user_id=None)
    task_id = (await result_of(owner, "tools/call", count(n=3, delay=0.2, task={})))["task"]["taskId"]
    other_session = dataclasses.replace(owner, session=dataclasses.replace(owner.session, id="sess-2"))
    signed_in = await ctx_for(demo_a, user_id=alice.id, client_id="c1")
    signed_in_task = (await result_of(signed_in, "tools/call", count(task={})))["task"]["taskId"]
    other_client = dataclasses.replace(signed_in, client_id="c2")
    other_user = dataclasses.replace(signed_in, user_id=bob.id)
    unknown = await error_of(owner, method, {"taskId": "no-such-task"})
    assert unknown == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert await error_of(other_session, method, {"taskId": task_id}) == unknown
    assert await error_of(other_client, method, {"taskId": signed_in_task}) == unknown
    assert await error_of(other_user, method, {"taskId": signed_in_task}) == unknown
    # The same user and client on another session is the same caller.
    assert await result_of(
        dataclasses.replace(signed_in, session=other_session.session), "tasks/get", {"taskId": signed_in_task}
    )


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
async def test_an_identity_providers_users_of_one_client_do_not_see_each_others_tasks(demo_a, method):
    """AMB-204: a tenant's own identity provider's users have no user id; their subject tells them apart."""
    alice = await ctx_for(demo_a, user_id=None, client_id="app", subject="https://idp.example.com#alice")
    task_id = (await result_of(alice, "tools/call", count(task={})))["task"]["taskId"]
    bob = dataclasses.replace(alice, subject="https://idp.example.com#bob")
    assert (await error_of(bob, method, {"taskId": task_id}))["message"] == tasks.NOT_FOUND
    assert (await result_of(bob, "tasks/list", {}))["tasks"] == []
    assert [t["taskId"] for t in (await result_of(alice, "tasks/list", {}))["tasks"]] == [task_id]
    assert tasks.owner_key(None, "app", alice.subject) != tasks.owner_key(None, "app", bob.subject)


async def test_an_expired_task_is_not_found(demo_a):
    ctx = await ctx_for(demo_a)
    task_id = (await result_of(ctx, "tools/call", count(task={})))["task"]["taskId"]
    await finished(ctx, task_id)
    await sync_to_async(ToolRun.objects.filter(task_id=task_id).update)(
        task_expires_at="2000-01-01T00:00:00Z"
    )
    assert (await error_of(ctx, "tasks/get", {"taskId": task_id}))["message"] == tasks.NOT_FOUND


async def test_a_status_change_is_announced_on_the_session_stream(demo_a, monkeypatch):
    sent: list[tuple[str, dict[str, Any]]] = []

    async def publish(session_id: str, event: dict[str, Any]) -> None:
        sent.append((session_id, event["message"]))

    monkeypatch.setattr(tasks.notify, "apublish_session", publish)
    ctx = await ctx_for(demo_a, progress_token="p1")
    task_id = (await result_of(ctx, "tools/call", count(task={})))["task"]["taskId"]
    await result_of(ctx, "tasks/result", {"taskId": task_id})
    await asyncio.sleep(0.1)
    statuses = [m for _, m in sent if m["method"] == "notifications/tasks/status"]
    assert statuses and statuses[-1]["params"]["status"] == "completed"
    progress = [m for _, m in sent if m["method"] == "notifications/progress"]
    assert progress and progress[0]["params"]["_meta"][tasks.RELATED_TASK] == {"taskId": task_id}
    assert {session for session, _ in sent} == {"sess-1"}


# --- 2026-07-28 -----------------------------------------------------------------------------------


async def test_server_discover_declares_the_tasks_extension_where_a_background_tool_exists(demo_a, demo_b):
    caps = (await result_of(await ctx_for(demo_a, MODERN, session=None), "server/discover"))["capabilities"]
    assert caps["extensions"] == {tasks.EXTENSION: {}}
    other = (await result_of(await ctx_for(demo_b, MODERN, session=None), "server/discover"))["capabilities"]
    assert "extensions" not in other


async def test_a_modern_client_with_the_extension_gets_a_flat_task_for_a_background_tool(demo_a, alice):
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS, user_id=alice.id)
    created = await result_of(ctx, "tools/call", count())
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000 and "task" not in created
    task = await finished(ctx, created["taskId"])
    assert task["status"] == "completed" and task["resultType"] == "complete"
    assert task["result"]["content"][0]["text"].startswith("Counted to 2")
    # tasks/result and tasks/list are gone from the extension.
    assert (await error_of(ctx, "tasks/result", {"taskId": created["taskId"]}))["code"] == -32601
    assert (await error_of(ctx, "tasks/list"))["code"] == -32601


async def test_a_modern_client_without_the_extension_or_an_inline_tool_gets_a_plain_result(demo_a):
    without = await ctx_for(demo_a, MODERN, session=None)
    assert (await result_of(without, "tools/call", count()))["resultType"] == "complete"
    inline = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    echo = await result_of(inline, "tools/call", {"name": "echo", "arguments": {"message": "m"}})
    assert echo["resultType"] == "complete"


async def test_modern_cancel_and_update_acknowledge_and_another_user_gets_not_found(demo_a, alice, bob):
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS, user_id=alice.id)
    task_id = (await result_of(ctx, "tools/call", count(n=50, delay=0.2)))["taskId"]
    assert (await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {"q1": {}}})) == {
        "resultType": "complete",
        "_meta": (await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {}}))["_meta"],
    }
    other = dataclasses.replace(ctx, user_id=bob.id)
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert (await error_of(other, method, {"taskId": task_id, "inputResponses": {}}))[
            "message"
        ] == tasks.NOT_FOUND
    cancelled = await result_of(ctx, "tasks/cancel", {"taskId": task_id})
    assert set(cancelled) == {"resultType", "_meta"}
    assert (await result_of(ctx, "tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    assert await result_of(ctx, "tasks/cancel", {"taskId": task_id})  # terminal: still acknowledged


async def test_a_legacy_task_is_not_found_by_a_modern_request_of_the_same_user(demo_a, alice):
    legacy = await ctx_for(demo_a, user_id=alice.id, client_id="c")
    task_id = (await result_of(legacy, "tools/call", count(task={})))["task"]["taskId"]
    modern = await ctx_for(
        demo_a, MODERN, session=None, user_id=alice.id, client_id="c", client_capabilities=EXTENSION_CAPS
    )
    assert (await error_of(modern, "tasks/get", {"taskId": task_id}))["message"] == tasks.NOT_FOUND


REQUIRES_EXTENSION = {"requiredCapabilities": {"extensions": {tasks.EXTENSION: {}}}}


async def test_a_tool_that_must_be_a_task_refuses_a_modern_client_without_the_extension_naming_it(demo_a):
    """AMB-124: ext-tasks "Capability Negotiation": a server that can only answer with a task says
    which extension it needs (-32021), rather than running the tool inline."""
    await sync_to_async(Tool.objects.filter(tenant=demo_a, name__in=["count_in_background", "echo"]).update)(
        task_support="required"
    )
    without = await ctx_for(demo_a, MODERN, session=None)
    for call in (count(), {"name": "echo", "arguments": {"message": "m"}}):
        error = await error_of(without, "tools/call", call)
        assert error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert error["data"] == REQUIRES_EXTENSION
        assert tasks.EXTENSION in error["message"] and call["name"] in error["message"]
    assert not await sync_to_async(ToolRun.objects.filter(tenant=demo_a).exists)()
    # With the extension, both are tasks: the inline echo too, since it must be one.
    declared = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    echo = await result_of(declared, "tools/call", {"name": "echo", "arguments": {"message": "m"}})
    assert echo["resultType"] == "task"
    assert (await finished(declared, echo["taskId"]))["result"]["structuredContent"] == {"echo": "m"}


async def test_task_methods_from_a_modern_client_without_the_extension_are_refused_naming_it(demo_a, alice):
    """AMB-124: ext-tasks "Protocol Errors": tasks/get, tasks/update and tasks/cancel from a client
    that did not declare the extension are -32021, even for its own task, which goes on untouched."""
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS, user_id=alice.id)
    task_id = (await result_of(ctx, "tools/call", count(n=3, delay=0.05)))["taskId"]
    without = dataclasses.replace(ctx, client_capabilities={"elicitation": {}})
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        error = await error_of(without, method, {"taskId": task_id, "inputResponses": {}})
        assert error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY, method
        assert error["data"] == REQUIRES_EXTENSION and method in error["message"]
    assert (await finished(ctx, task_id))["status"] == "completed"  # the refused cancel stopped nothing


# --- 2026-07-28: a task that asks (protocol/task_input.py) ----------------------------------------


@pytest.fixture
async def asking_tool(demo_a: Any) -> str:
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="ask_in_background",
        handler="python",
        handler_config={"callable": "ask_name"},
        timeout_seconds=20,
        execution="background",
    )
    return "ask_in_background"


def bare(result: dict[str, Any]) -> bool:
    """An empty result, as every 2026-07-28 result is finished (resultType, the server's _meta)."""
    return set(result) <= {"resultType", "_meta"}


async def status_becomes(ctx: RequestContext, task_id: str, status: str) -> dict[str, Any]:
    for _ in range(200):
        task = await result_of(ctx, "tasks/get", {"taskId": task_id})
        if task["status"] == status:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"the task never became {status}")


async def test_a_modern_task_that_asks_is_input_required_until_tasks_update_brings_the_answer(
    demo_a, asking_tool
):
    caps = {**EXTENSION_CAPS, "elicitation": {}}
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=caps)
    created = await result_of(ctx, "tools/call", {"name": asking_tool, "arguments": {"question": "Name?"}})
    task_id = created["taskId"]
    waiting = await status_becomes(ctx, task_id, "input_required")
    ((key, question),) = waiting["inputRequests"].items()
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "Name?"
    # A response to nothing outstanding is ignored; another caller's update finds no task.
    assert bare(await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {"q9": {}}}))
    assert (await result_of(ctx, "tasks/get", {"taskId": task_id}))["status"] == "input_required"
    stranger = await ctx_for(demo_a, MODERN, session=None, client_capabilities=caps, user_id=99)
    answer = {"action": "accept", "content": {"name": "Ada"}}
    refused = await error_of(stranger, "tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    assert refused["code"] == -32602
    assert bare(await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}))
    done = await finished(ctx, task_id)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Hello, Ada!"
    run = await sync_to_async(ToolRun.objects.get)(task_id=task_id)
    assert [(e["key"], e["answer"]) for e in run.exchanges] == [(key, answer)]


async def test_a_signed_in_callers_modern_task_announces_each_status_to_its_owner_only(
    demo_a, asking_tool, alice, monkeypatch
):
    announced: list[tuple[int, dict[str, Any]]] = []

    async def publish(tenant_id: int, event: dict[str, Any]) -> None:
        announced.append((tenant_id, event))

    monkeypatch.setattr(tasks.notify, "apublish_tenant", publish)
    caps = {**EXTENSION_CAPS, "elicitation": {}}
    ctx = await ctx_for(
        demo_a, MODERN, session=None, client_capabilities=caps, user_id=alice.id, client_id="c"
    )
    task_id = (await result_of(ctx, "tools/call", {"name": asking_tool, "arguments": {"question": "Q?"}}))[
        "taskId"
    ]
    waiting = await status_becomes(ctx, task_id, "input_required")
    ((key, _),) = waiting["inputRequests"].items()
    answer = {"action": "accept", "content": {"name": "Ada"}}
    await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    await finished(ctx, task_id)
    await asyncio.sleep(0.1)
    assert {tenant for tenant, _ in announced} == {demo_a.id}
    assert {event["type"] for _, event in announced} == {"mcp.task_status"}
    assert {tuple(event["owner"]) for _, event in announced} == {(alice.id, "c", "")}
    assert [event["task"]["status"] for _, event in announced] == ["input_required", "working", "completed"]
    assert announced[0][1]["task"]["inputRequests"][key]["method"] == "elicitation/create"
    assert announced[-1][1]["task"]["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_an_anonymous_modern_task_is_announced_to_nobody(demo_a, monkeypatch):
    announced: list[dict[str, Any]] = []

    async def publish(tenant_id: int, event: dict[str, Any]) -> None:
        announced.append(event)

    monkeypatch.setattr(tasks.notify, "apublish_tenant", publish)
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    await finished(ctx, (await result_of(ctx, "tools/call", count()))["taskId"])
    await asyncio.sleep(0.1)
    assert announced == []


async def test_a_modern_task_whose_creator_cannot_be_asked_ends_with_an_error_result_saying_so(
    demo_a, asking_tool
):
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    created = await result_of(ctx, "tools/call", {"name": asking_tool, "arguments": {}})
    done = await finished(ctx, created["taskId"])
    assert done["result"]["isError"] is True
    assert "did not declare that capability" in done["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("status", "result", "expected"),
    [
        ("done", {"content": [{"type": "text", "text": "Counted to 2."}]}, "completed"),
        ("lost", None, "completed"),  # 2026-07-28: an isError result is a completed call
        ("cancelled", None, "cancelled"),
        ("running", None, "working"),
    ],
)
async def test_a_task_whose_process_went_away_reads_how_its_run_ended_on_the_row(
    demo_a, count_in_background, status, result, expected
):
    """The worker records its run's end on the same row, so the task is not left `working`."""
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    tool = (await catalogs.get_catalog(demo_a.id)).tools_by_name["count_in_background"]
    row = await sync_to_async(tasks._create)(ctx, tool, 60_000)
    await sync_to_async(ToolRun.objects.filter(pk=row.pk).update)(
        status=status, result=result, detail="The worker stopped answering."
    )
    task = await result_of(ctx, "tasks/get", {"taskId": row.task_id})
    assert task["status"] == expected
    if status == "done":
        assert task["result"] == result
    if status == "lost":
        assert task["result"]["isError"] is True
        assert task["result"]["content"][0]["text"] == "The worker stopped answering."


async def test_a_2025_11_25_task_that_asks_sends_its_question_on_the_session_stream_and_is_input_required(
    demo_a, asking_tool, monkeypatch
):
    sent: list[dict[str, Any]] = []

    async def publish(session_id: str, event: dict[str, Any]) -> None:
        sent.append(event["message"])

    monkeypatch.setattr(tasks.notify, "apublish_session", publish)
    ctx = await ctx_for(demo_a, client_capabilities={"elicitation": {}})
    created = await result_of(ctx, "tools/call", {"name": asking_tool, "arguments": {}, "task": {}})
    task_id = created["task"]["taskId"]
    await status_becomes(ctx, task_id, "input_required")
    # The status is written before the question goes out on the stream: on a busy machine a moment apart.
    for _ in range(200):
        if asked := [m for m in sent if m.get("method") == "elicitation/create"]:
            break
        await asyncio.sleep(0.05)
    (question,) = asked
    assert question["params"]["_meta"][tasks.RELATED_TASK] == {"taskId": task_id}
    answer = {"action": "accept", "content": {"name": "Ada"}}
    await asking.deliver("sess-1", {"jsonrpc": "2.0", "id": question["id"], "result": answer})
    result = await result_of(ctx, "tasks/result", {"taskId": task_id})
    assert result["content"][0]["text"] == "Hello, Ada!"


@pytest.mark.services(reason="the serving process beats for the tasks it runs in Redis")
async def test_an_inline_task_whose_server_process_died_is_reported_once_instead_of_working_forever(
    demo_a, count_in_background, settings
):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    ctx = await ctx_for(demo_a, MODERN, session=None, client_capabilities=EXTENSION_CAPS)
    tool = (await catalogs.get_catalog(demo_a.id)).tools_by_name["count_in_background"]
    alive = await sync_to_async(tasks._create)(ctx, tool, 60_000)
    dead = await sync_to_async(tasks._create)(ctx, tool, 60_000)
    for row in (alive, dead):
        await sync_to_async(ToolRun.objects.filter(pk=row.pk).update)(status="running", worker="h:1 (server)")
    await runs.runner_beat(alive.job_id)  # its process still runs it
    assert (await result_of(ctx, "tasks/get", {"taskId": alive.task_id}))["status"] == "working"
    task = await result_of(ctx, "tasks/get", {"taskId": dead.task_id})
    assert task["status"] == "completed" and task["result"]["isError"] is True
    assert "server process running this task stopped" in task["result"]["content"][0]["text"]
    assert (await run_status(dead.job_id)) == "lost"


async def run_status(job_id: str) -> str:
    return (await sync_to_async(ToolRun.objects.get)(job_id=job_id)).status


@pytest.mark.parametrize("version", ["2025-11-25", MODERN])
async def test_a_task_queued_past_a_second_says_it_is_waiting_for_a_worker(demo_a, version):
    """AMB-114: the run's row is still queued (no worker took it): tasks/get says why it is not running."""
    ctx = await ctx_for(demo_a, version, session=None, client_capabilities=EXTENSION_CAPS)
    tool = (await catalogs.get_catalog(demo_a.id)).tools_by_name["count_in_background"]
    row = await sync_to_async(tasks._create)(ctx, tool, 60_000)
    task = await result_of(ctx, "tasks/get", {"taskId": row.task_id})
    assert (task["status"], "statusMessage" in task) == ("working", False)  # a free worker takes ms
    queued_at = row.queued_at - timedelta(seconds=2)
    await sync_to_async(ToolRun.objects.filter(pk=row.pk).update)(queued_at=queued_at)
    task = await result_of(ctx, "tasks/get", {"taskId": row.task_id})
    assert (task["status"], task["statusMessage"]) == ("working", "Waiting for a worker")
    await sync_to_async(ToolRun.objects.filter(pk=row.pk).update)(status=ToolRun.Status.RUNNING)
    task = await result_of(ctx, "tasks/get", {"taskId": row.task_id})
    assert "statusMessage" not in task

def one_field(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


async def test_a_modern_task_asks_a_forms_questions_together_and_takes_their_answers_in_parts(
    demo_a, monkeypatch
):
    """AMB-122: a form that must be a task puts all its questions on the row at once, under their
    names; tasks/update may answer some; the task goes on when every one is answered."""
    questions = [{"name": n, "message": f"{n}?", "fields": one_field(n)} for n in ("who", "where", "when")]
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a,
        name="plan",
        handler="form",
        handler_config={"questions": questions, "text": "{{ who }}/{{ where }}/{{ when }}"},
        task_support="required",
        timeout_seconds=20,
    )
    ctx = await ctx_for(
        demo_a, MODERN, session=None, client_capabilities={**EXTENSION_CAPS, "elicitation": {}}
    )
    task_id = (await result_of(ctx, "tools/call", {"name": "plan"}))["taskId"]
    waiting = await status_becomes(ctx, task_id, "input_required")
    assert list(waiting["inputRequests"]) == ["who", "where", "when"]
    answer = {n: {"action": "accept", "content": {n: n.upper()}} for n in ("who", "where", "when")}
    monkeypatch.setattr(task_input, "ANSWER_POLL_SECONDS", 0.01)
    await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": {"where": answer["where"]}})
    for _ in range(15):  # the asking task looks at its row many times meanwhile: it keeps waiting
        task = await result_of(ctx, "tasks/get", {"taskId": task_id})
        assert task["status"] == "input_required" and list(task["inputRequests"]) == ["who", "when"]
        await asyncio.sleep(0.02)
    rest = {"who": answer["who"], "when": answer["when"]}
    await result_of(ctx, "tasks/update", {"taskId": task_id, "inputResponses": rest})
    done = await finished(ctx, task_id)
    assert done["result"]["content"][0]["text"] == "WHO/WHERE/WHEN"
