"""Tasks: a tools/call answered with a handle at once, its result fetched later (AMB-47).

2025-11-25 sessions ask for one (`params.task`, per the tool's `execution.taskSupport`) and use
tasks/get, tasks/result (blocks), tasks/list and tasks/cancel. 2026-07-28 clients that declare the
`io.modelcontextprotocol/tasks` extension get one when the server decides (a background tool) and use
tasks/get (the result inlined once terminal), tasks/update and tasks/cancel.

A task is a ToolRun row with a task id: the same row a background run has, so the worker claims it
as before. The run itself goes on in this process as an asyncio task (an inline tool runs here, a
background one waits here for its worker, as a plain call does); its outcome is written on the row
by one conditional UPDATE, which tasks/cancel races with: whoever writes first wins, so a cancelled
task stays cancelled. Any process answers tasks/get from the row; a cancellation made on another
process is seen by the running one within WATCH_SECONDS.

A task belongs to the caller that created it: the tenant, OAuth user and client, or for an anonymous
caller its legacy session. Anyone else gets the not-found answer of an unknown id.

Longer than 400 lines: the rows, their two shapes, the runner and six methods belong together.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from mcp_app.background import contract, runs
from mcp_app.background import relay as background
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import error_result
from mcp_app.core.types import Catalog, ToolDef
from mcp_app.core.versions import V2025_11_25, is_modern
from mcp_app.handlers import upstream
from mcp_app.infra import notify
from mcp_app.models import ToolRun
from mcp_app.protocol import asking, task_input
from mcp_app.protocol.jsonrpc import (
    InvalidParams,
    JsonRpcError,
    MethodNotFound,
    MissingRequiredClientCapability,
    truncate,
)
from mcp_app.protocol.pagination import decode_cursor, encode_cursor, with_cursor

logger = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
FORBIDDEN, OPTIONAL, REQUIRED = "forbidden", "optional", "required"
POLL_INTERVAL_MS = 1000
# How often a running task checks its row for a cancellation made through another process.
WATCH_SECONDS = 1.0
# How often tasks/result looks at the row again while it waits (the run may be on another process).
RESULT_POLL_SECONDS = 0.25
PURGE_EVERY_SECONDS = 60.0
PAGE_SIZE = 50
# Larger results are left out of a notifications/tasks event (sent to every listener process).
MAX_ANNOUNCED_RESULT_BYTES = 64 * 1024
TERMINAL = ("completed", "failed", "cancelled")
NOT_FOUND = "Failed to retrieve task: Task not found"

_running: dict[str | None, asyncio.Task] = {}  # task id → the run going on in this process
_last_purge: float | None = None

Run = Callable[[RequestContext, str], Coroutine[Any, Any, dict[str, Any]]]


# --- Who may ask for tasks ----------------------------------------------------------------------


def legacy_capability() -> dict[str, Any]:
    """The 2025-11-25 `tasks` server capability, declared when some tool of the tenant can run as a task."""
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def becomes_task(tool: ToolDef) -> bool:
    """2026-07-28: the server decides; a background tool (unless forbidden) is long enough to be one, so
    is a published tool its upstream runs only as a task (AMB-200), and a tool whose task support is
    required is always one."""
    if tool.task_support == REQUIRED:
        return True
    long = tool.execution == "background" or tool.handler_config.get(upstream.TASK_KEY) == REQUIRED
    return long and tool.task_support != FORBIDDEN


def modern_extension(catalog: Catalog) -> bool:
    return any(becomes_task(tool) for tool in catalog.tools)


def declares_extension(ctx: RequestContext) -> bool:
    """Whether this 2026-07-28 request's client capabilities name the tasks extension."""
    extensions = ctx.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def extension_required(why: str) -> MissingRequiredClientCapability:
    """-32021 naming the tasks extension (ext-tasks "Capability Negotiation", "Protocol Errors")."""
    return MissingRequiredClientCapability(
        truncate(why, 300), data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    )


def _require_extension(ctx: RequestContext, method: str) -> None:
    """2026-07-28: tasks/get, tasks/update and tasks/cancel are for clients that declared the extension."""
    if is_modern(ctx.protocol_version) and not declares_extension(ctx):
        raise extension_required(
            f"{method} belongs to the {EXTENSION} extension, which this request's client capabilities "
            "do not declare."
        )


def wanted(ctx: RequestContext, tool: ToolDef, params: dict[str, Any]) -> bool:
    """Whether this tools/call runs as a task; -32601 where the tool's taskSupport forbids the choice
    (2025-11-25), -32021 where a 2026-07-28 client cannot take the task a tool must be."""
    if is_modern(ctx.protocol_version):
        if not declares_extension(ctx):
            if tool.task_support == REQUIRED:
                raise extension_required(
                    f"Tool {tool.name!r} runs only as a task: declare the {EXTENSION} extension."
                )
            return False
        return becomes_task(tool)
    if ctx.protocol_version != V2025_11_25 or not ctx.tenant.has_task_tools:
        return False  # not declared: a task field is ignored, as the spec directs
    asked = isinstance(params.get("task"), dict)
    if asked and tool.task_support == FORBIDDEN:
        raise MethodNotFound(truncate(f"Tool {tool.name!r} does not support task-augmented calls.", 200))
    if not asked and tool.task_support == REQUIRED:
        raise MethodNotFound(truncate(f"Tool {tool.name!r} must be called as a task (params.task).", 200))
    return asked


# --- The rows -----------------------------------------------------------------------------------


def _owner(ctx: RequestContext) -> dict[str, Any]:
    owner: dict[str, Any] = {
        "tenant_id": ctx.tenant.id,
        "user_id": ctx.user_id,
        "client_id": ctx.client_id or "",
        "subject": ctx.subject or "",
        "task_protocol_version": ctx.protocol_version,
    }
    if ctx.user_id is None and not ctx.client_id:
        # Anonymous: only a legacy session tells callers apart; a sessionless one has the id alone.
        owner["session_id"] = ctx.session.id if ctx.session else ""
    return owner


def _create(ctx: RequestContext, tool: ToolDef, ttl_ms: int) -> ToolRun:
    _maybe_purge()
    now = timezone.now()
    return ToolRun.objects.create(
        job_id=secrets.token_urlsafe(16),
        task_id=secrets.token_urlsafe(24),
        tenant_id=ctx.tenant.id,
        tool_id=tool.id,
        tool_name=tool.name,
        user_id=ctx.user_id,
        client_id=ctx.client_id or "",
        subject=ctx.subject or "",
        session_id=ctx.session.id if ctx.session else "",
        task_protocol_version=ctx.protocol_version,
        task_ttl_ms=ttl_ms,
        task_expires_at=now + timedelta(milliseconds=ttl_ms),
    )


def _maybe_purge() -> None:
    global _last_purge
    now = time.monotonic()
    if _last_purge is not None and now - _last_purge < PURGE_EVERY_SECONDS:
        return
    _last_purge = now
    # The run's history stays (the admin lists it); the task, its id and its result go.
    ToolRun.objects.filter(task_expires_at__lt=timezone.now()).update(
        task_id=None, task_outcome=None, task_expires_at=None
    )


def _find(ctx: RequestContext, task_id: Any) -> ToolRun | None:
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        return None
    return (
        ToolRun.objects.filter(task_id=task_id, task_expires_at__gt=timezone.now(), **_owner(ctx))
        .only(*_FIELDS)
        .first()
    )


_FIELDS = (
    "id",
    "job_id",
    "task_id",
    "status",
    "queued_at",
    "started_at",
    "finished_at",
    "session_id",
    "task_protocol_version",
    "task_ttl_ms",
    "task_outcome",
    "exchanges",
    "result",
    "detail",
    "worker",
)


def _page(ctx: RequestContext, after: int | None) -> list[ToolRun]:
    rows = ToolRun.objects.filter(task_expires_at__gt=timezone.now(), **_owner(ctx)).exclude(task_id=None)
    if after is not None:
        rows = rows.filter(id__lt=after)
    return list(rows.order_by("-id").only(*_FIELDS)[: PAGE_SIZE + 1])


def _end(job_id: str, outcome: dict[str, Any]) -> bool:
    """Write how the task ended, unless something (a cancellation) already did."""
    return bool(ToolRun.objects.filter(job_id=job_id, task_outcome__isnull=True).update(task_outcome=outcome))


def _outcome_of(job_id: str) -> dict[str, Any] | None:
    return ToolRun.objects.filter(job_id=job_id).values_list("task_outcome", flat=True).first()


def _cancel(row: ToolRun, message: str = "The task was cancelled by request.") -> bool:
    if not _end(row.job_id, {"status": "cancelled", "message": message}):
        return False
    # A queued run never starts; a running one is stopped by its process, which records how.
    ToolRun.objects.filter(job_id=row.job_id, status=runs.QUEUED).update(
        status=ToolRun.Status.CANCELLED,
        finished_at=timezone.now(),
        detail="Task cancelled before it started.",
    )
    return True


def cancel_from_admin(row: ToolRun, who: str) -> bool:
    """An operator cancels a task: as tasks/cancel does (its process stops the work within a second)."""
    return _cancel(row, f"The task was cancelled by an operator ({who}).")


def cancel_by_operator(row: ToolRun, who: str) -> None:
    """An operator (the admin's button, the API) stops a run: a task as tasks/cancel does, a plain
    background run through its worker, which tells the waiting caller who stopped it. Raises when
    Redis cannot be reached."""
    if row.task_id:
        cancel_from_admin(row, who)
    else:
        contract.cancel_from_admin(row.job_id, who)


# --- Shapes ---------------------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _outcome_on(row: ToolRun) -> dict[str, Any] | None:
    """How the task ended: as written on the row, or, when the process that ran it went away before
    writing it, as its run ended (a worker records its result and status on the same row)."""
    if isinstance(row.task_outcome, dict):
        return row.task_outcome
    if row.status in (ToolRun.Status.DONE, ToolRun.Status.FAILED) and isinstance(row.result, dict):
        return _outcome(row.task_protocol_version, row.result)
    if row.status in (ToolRun.Status.LOST, ToolRun.Status.NOT_STARTED):
        return _outcome(row.task_protocol_version, error_result(row.detail or "The run was lost."))
    if row.status == ToolRun.Status.CANCELLED:
        return {"status": "cancelled", "message": row.detail or "The task was cancelled."}
    return None


def _status(row: ToolRun) -> str:
    outcome = _outcome_on(row)
    if outcome is not None:
        return outcome["status"]
    return "input_required" if task_input.pending(row.exchanges) else "working"


def describe(row: ToolRun, detailed: bool = False) -> dict[str, Any]:
    """The Task object in the row's era; `detailed` (2026-07-28 tasks/get) inlines the outcome."""
    modern = is_modern(row.task_protocol_version)
    updated = max(t for t in (row.queued_at, row.started_at, row.finished_at) if t is not None)
    task: dict[str, Any] = {"taskId": row.task_id, "status": _status(row)}
    outcome = _outcome_on(row) or {}
    if outcome.get("message"):
        task["statusMessage"] = outcome["message"]
    elif _waiting_for_a_worker(row):
        task["statusMessage"] = background.WAITING_FOR_A_WORKER
    task["createdAt"] = _iso(row.queued_at)
    task["lastUpdatedAt"] = _iso(updated)
    task["ttlMs" if modern else "ttl"] = row.task_ttl_ms
    task["pollIntervalMs" if modern else "pollInterval"] = POLL_INTERVAL_MS
    if detailed and task["status"] == "input_required":
        task["inputRequests"] = task_input.pending(row.exchanges)
    if detailed and "result" in outcome:
        task["result"] = outcome["result"]
    if detailed and "error" in outcome:
        task["error"] = outcome["error"]
    return task


def _waiting_for_a_worker(row: ToolRun) -> bool:
    """Still queued past the moment a free worker would have started it (AMB-114); an inline task's
    row is claimed by its own process at once."""
    waited = (timezone.now() - row.queued_at).total_seconds()
    return row.status == ToolRun.Status.QUEUED and waited >= background.WAITING_NOTICE_SECONDS


def _outcome(version: str, result: dict[str, Any]) -> dict[str, Any]:
    """A finished call's outcome. 2025-11-25 counts an isError result as failed; the 2026-07-28
    extension keeps failed for JSON-RPC errors, so there it is a completed call with an error result."""
    failed = bool(result.get("isError")) and not is_modern(version)
    outcome: dict[str, Any] = {"status": "failed" if failed else "completed", "result": result}
    if failed:
        texts = [b.get("text") for b in result.get("content") or [] if isinstance(b, dict)]
        outcome["message"] = truncate(
            "Tool execution failed: " + " ".join(t for t in texts if isinstance(t, str)), 500
        )
    return outcome


# --- Running ----------------------------------------------------------------------------------------


def _ttl(ctx: RequestContext, params: dict[str, Any]) -> int:
    cap = ctx.tenant.task_ttl_seconds * 1000
    task = found if isinstance(found := params.get("task"), dict) else {}
    requested = task.get("ttl")
    if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
        return max(POLL_INTERVAL_MS, min(requested, cap))
    return cap


def _task_emit(ctx: RequestContext, task_id: str) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """Progress and log messages of a task go to its legacy session's stream (the call's POST is over)."""
    session_id = ctx.session.id if ctx.session else None

    async def emit(message: dict[str, Any]) -> None:
        if session_id is None:
            return  # 2026-07-28: no stream outlives the request; the client polls
        params = dict(message.get("params") or {})
        params["_meta"] = {**(params.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
        await _publish(session_id, {**message, "params": params})

    return emit


async def _publish(session_id: str, message: dict[str, Any]) -> None:
    try:
        await notify.apublish_session(session_id, {"type": "mcp.session_message", "message": message})
    except Exception:  # best effort: the client polls anyway
        logger.exception("could not send a task message to session %s", session_id)


def owner_key(user_id: int | None, client_id: str | None, subject: str | None = "") -> list[Any] | None:
    """Who a 2026-07-28 task's status notifications go to: its OAuth user and client (and the tenant's
    identity provider's user, AMB-204). None for an anonymous caller, whose task only the holder of its
    id may know of (so nobody is told)."""
    if user_id is None and not client_id and not subject:
        return None
    return [user_id, client_id or "", subject or ""]


async def _announce(job_id: str) -> None:
    """A task's status changed: notifications/tasks/status on its legacy session's stream, or
    notifications/tasks to its owner's subscriptions/listen streams (2026-07-28). Best effort."""
    row = await database_sync_to_async(lambda: ToolRun.objects.filter(job_id=job_id).first())()
    if row is None or not row.task_id:
        return
    if not is_modern(row.task_protocol_version):
        if row.session_id:
            await _publish(
                row.session_id,
                {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": describe(row)},
            )
        return
    owner = owner_key(row.user_id, row.client_id, row.subject)
    if owner is None:
        return
    task = describe(row, detailed=True)
    if len(json.dumps(task.get("result"), default=str)) > MAX_ANNOUNCED_RESULT_BYTES:
        # Every listener of the tenant receives the event: a large result is fetched with tasks/get.
        task.pop("result", None)
    try:
        await notify.apublish_tenant(row.tenant_id, {"type": "mcp.task_status", "owner": owner, "task": task})
    except Exception:  # the client can always poll
        logger.exception("could not announce the status of task run %s", job_id)


async def create(
    ctx: RequestContext,
    tool: ToolDef,
    params: dict[str, Any],
    run: Run,
    in_background: bool,
    answered: asking.Rounds | None = None,
) -> dict[str, Any]:
    """Make the task, start `run` (the call's own path, given the task's context and job id), answer at once.

    `answered`: the rounds in which the handler asked its questions before the task (AMB-286); the
    task's handler gets their answers, as the same call (its call id and what it carried).
    """
    row = await database_sync_to_async(_create)(ctx, tool, _ttl(ctx, params))
    assert row.task_id is not None, "_create gives the run its task id"
    task_ctx = dataclasses.replace(
        ctx, emit=_task_emit(ctx, row.task_id), cancelled=asyncio.Event(), request_id=None
    )
    # A task's handler asks while the task is input_required: answered by tasks/update (2026-07-28),
    # or as a request on the legacy session's stream.
    task_asker = task_input.asker if is_modern(ctx.protocol_version) else task_input.session_asker
    ask = task_asker(task_ctx, row.job_id, _announce)
    if answered is not None:
        ask = task_input.replaying(task_ctx, answered, ask)
        task_ctx = dataclasses.replace(task_ctx, call_id=answered.call_id, carried=answered.carried)
    task_ctx = dataclasses.replace(task_ctx, ask=ask)
    runner = asyncio.get_running_loop().create_task(_run(task_ctx, row, run, in_background))
    _running[row.task_id] = runner
    runner.add_done_callback(lambda _: _running.pop(row.task_id, None))
    task = describe(row)
    if is_modern(ctx.protocol_version):
        return {"resultType": "task", **task}
    return {"task": task}


async def _run(ctx: RequestContext, row: ToolRun, run: Run, in_background: bool) -> None:
    job_id = row.job_id
    here = f"{socket.gethostname()}:{os.getpid()}{runs.IN_SERVER}"
    await runs.runner_beat(job_id)  # before the claim: a running row always has a live beat
    if not in_background and not await database_sync_to_async(runs.claim)(job_id, here):
        return  # cancelled before it started
    work = asyncio.get_running_loop().create_task(run(ctx, job_id))
    try:
        while not work.done():
            await asyncio.wait({work}, timeout=WATCH_SECONDS)
            if work.done():
                break
            await runs.runner_beat(job_id)
            outcome = await database_sync_to_async(_outcome_of)(job_id)
            if isinstance(outcome, dict) and outcome.get("status") == "cancelled":
                raise asyncio.CancelledError  # cancelled through another process
        try:
            outcome = _outcome(ctx.protocol_version, work.result())
        except JsonRpcError as exc:
            outcome = {"status": "failed", "error": exc.to_error(), "message": exc.message}
    except asyncio.CancelledError:
        # tasks/cancel (here or elsewhere), or the process is stopping: the work stops too; a
        # background run tells its worker on its way out.
        ctx.cancelled.set()
        await asyncio.shield(_stop(work))
        if not in_background:
            await asyncio.shield(
                runs.close_run(job_id, (runs.RUNNING,), ToolRun.Status.CANCELLED, "Task cancelled.")
            )
        return
    except Exception:
        logger.exception("task of tool run %s failed outside its handler", job_id)
        outcome = _outcome(ctx.protocol_version, error_result("The tool failed with an internal error."))
    if not in_background:
        failed = outcome["status"] == "failed" or bool(outcome.get("result", {}).get("isError"))
        await runs.close_run(
            job_id, (runs.RUNNING,), ToolRun.Status.FAILED if failed else ToolRun.Status.DONE
        )
    if await database_sync_to_async(_end)(job_id, outcome):
        await _announce(job_id)


async def _stop(work: asyncio.Task) -> None:
    work.cancel()
    try:
        await work
    except BaseException:  # noqa: BLE001 - it only has to stop; how is of no interest
        logger.debug("a cancelled task's work ended", exc_info=True)


# --- The methods ------------------------------------------------------------------------------------


def _task_id(params: dict[str, Any]) -> Any:
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        raise InvalidParams('Tasks need "taskId" (a string).')
    return task_id


async def _row(ctx: RequestContext, params: dict[str, Any]) -> ToolRun:
    row = await database_sync_to_async(_find)(ctx, _task_id(params))
    if row is None:
        raise InvalidParams(NOT_FOUND)
    if (
        row.status == ToolRun.Status.RUNNING
        and row.worker.endswith(runs.IN_SERVER)
        and row.task_outcome is None
        and await runs.runner_gone(row.job_id)
    ):
        # The process that ran this task in itself died: say so once, rather than `working` until the ttl.
        why = "The server process running this task stopped before it ended; it was not retried."
        if await database_sync_to_async(_end)(
            row.job_id, _outcome(row.task_protocol_version, error_result(why))
        ):
            await runs.close_run(row.job_id, (runs.RUNNING,), ToolRun.Status.LOST, why)
            await _announce(row.job_id)
        row = await database_sync_to_async(_find)(ctx, row.task_id) or row
    return row


async def handle_get(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    _require_extension(ctx, "tasks/get")
    return describe(await _row(ctx, params), detailed=is_modern(ctx.protocol_version))


async def handle_result(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Block until the task is terminal, then answer exactly what the call would have (its result or error)."""
    row = await _row(ctx, params)
    delay = RESULT_POLL_SECONDS
    while _status(row) not in TERMINAL:
        await asyncio.sleep(delay)
        delay = min(delay * 2, WATCH_SECONDS)
        row = await _row(ctx, params)
    outcome = _outcome_on(row)
    assert isinstance(outcome, dict)
    if "error" in outcome:
        error = outcome["error"]
        raise _stored_error(error)
    if "result" not in outcome:  # cancelled before it ended
        raise InvalidParams(truncate(f"Task {row.task_id} was cancelled; it has no result.", 200))
    result = dict(outcome["result"])
    result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": row.task_id}}
    return result


def _stored_error(error: dict[str, Any]) -> JsonRpcError:
    exc = JsonRpcError(str(error.get("message") or "Internal error"), error.get("data"))
    exc.code = int(error.get("code") or -32603)
    return exc


async def handle_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    cursor = params.get("cursor")
    after = None
    if cursor is not None:
        key = decode_cursor(ctx, "tasks", cursor)
        if not key.isdigit():
            raise InvalidParams("Invalid cursor.")
        after = int(key)
    rows = await database_sync_to_async(_page)(ctx, after)
    page = rows[:PAGE_SIZE]
    next_cursor = encode_cursor(ctx, "tasks", str(page[-1].id)) if len(rows) > PAGE_SIZE else None
    return with_cursor({"tasks": [describe(row) for row in page]}, next_cursor)


async def handle_cancel(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    _require_extension(ctx, "tasks/cancel")
    row = await _row(ctx, params)
    status = _status(row)
    if status in TERMINAL:
        if is_modern(ctx.protocol_version):
            return {}  # cooperative: acknowledged, nothing to stop
        raise InvalidParams(f"Cannot cancel task: already in terminal status '{status}'")
    if await database_sync_to_async(_cancel)(row):
        runner = _running.get(row.task_id)
        if runner is not None:
            runner.cancel()
        await _announce(row.job_id)
    row = await _row(ctx, params)
    if is_modern(ctx.protocol_version):
        return {}
    if _status(row) != "cancelled":
        # It ended while we were cancelling it: terminal now, so it cannot be cancelled.
        raise InvalidParams(f"Cannot cancel task: already in terminal status '{_status(row)}'")
    return describe(row)


async def handle_update(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """2026-07-28: answers for a task that is input_required (task_input.py); a response to a question
    that is not outstanding is ignored, as the extension directs; unknown ids are not found."""
    _require_extension(ctx, "tasks/update")
    row = await _row(ctx, params)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams('tasks/update needs "inputResponses" (an object).')
    if _status(row) == "input_required":
        await database_sync_to_async(task_input.answer)(row.job_id, responses)
    return {}
