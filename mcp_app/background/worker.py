"""The worker side of background tools: run one job a Celery worker received (see background.relay).

What both sides share (the task name, the job's Redis keys, the timings) is background.contract.

The job carries what is needed to rebuild the caller's request context; the tool is looked up again
(by tenant, name and id), so an edit or removal since the call is seen. The run goes through the same
funnel as an inline call (handlers.registry.run_inline: timeout, error results); replies go back on
the caller's channel. A handler's question goes back on it too, and the handler waits for the answer
the server pushes onto the question's Redis list (background.relay): the client's answer, an error
it raises as a ToolError, or the end of a 2026-07-28 round (the call has returned its question).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
import os
import socket
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_app import catalog as catalogs
from mcp_app.background import contract, runs
from mcp_app.core.context import ASK_TOGETHER, Asker, resources_of
from mcp_app.core.errors import (
    AskOutcome,
    GoAsync,
    InputRequired,
    MissingCapability,
    ProtocolError,
    ToolError,
    error_result,
)
from mcp_app.core.types import Catalog, TenantInfo, ToolDef
from mcp_app.governance import guardrails
from mcp_app.handlers import registry
from mcp_app.infra import redis_client
from mcp_app.models import ToolRun

logger = logging.getLogger(__name__)


class _Replies:
    """Sends a job's replies to the server process waiting for them: each kept in the job's Redis
    stream first (for a process that takes the call's stream over, AMB-369), then sent with its entry
    id on the waiting process's channel."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job_id = job["id"]
        self.channel = job["reply_to"]
        layer = get_channel_layer()
        assert layer is not None, "CHANNEL_LAYERS is configured (mcpsite/settings.py)"
        self.layer = layer
        # Kept and sent in one order: a relay marks how far it stored by entry id, so a reply sent
        # before an earlier one would let a takeover skip that one.
        self.lock = asyncio.Lock()

    async def _keep(self, reply: dict[str, Any]) -> str:
        """Keep `reply` in the job's stream; its entry id. Expires with the events it may become."""
        key = contract.replies_key(self.job_id)
        async with redis_client.client().pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"reply": json.dumps(reply)}, maxlen=contract.REPLIES_KEPT, approximate=True)
            pipe.expire(key, settings.MCP_EVENT_RETENTION_SECONDS)
            return str((await pipe.execute())[0])

    async def send(self, kind: str, reliable: bool = False, **fields: Any) -> bool:
        """Keep, then send, one reply; a full channel drops it (best effort) or, `reliable`, is retried.
        False if it never got through the channel (it is kept all the same)."""
        async with self.lock:
            reply = {"type": kind, "job": self.job_id, **fields}
            entry = await self._keep(reply)
            deadline = time.monotonic() + contract.RESULT_SEND_SECONDS
            delay = 0.05
            while True:
                try:
                    await self.layer.send(self.channel, {**reply, "reply": entry})
                    return True
                except ChannelFull:
                    if not reliable:
                        logger.debug("job %s: reply channel full, a notification was dropped", self.job_id)
                        return False
                    if time.monotonic() > deadline:
                        logger.error("job %s: the server never took the %s", self.job_id, kind)
                        return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def emit(self, message: dict[str, Any]) -> None:
        try:
            await self.send("mcp.job.emit", message=message)
        except ChannelFull:  # best effort, as `send` itself treats it
            logger.debug("job %s: reply channel full, a notification was dropped", self.job_id)

    async def reliably(self, kind: str, **fields: Any) -> bool:
        """Send a reply that must not be dropped, retrying a full channel; False if it never got through."""
        return await self.send(kind, reliable=True, **fields)

    async def result(self, result: dict[str, Any]) -> None:
        await self.reliably("mcp.job.result", result=result)


async def _answer_to(job_id: str, ask_id: str, cancelled: asyncio.Event) -> dict[str, Any]:
    """What the server pushed for one question; a cancellation or a server that never answers ends the wait."""
    redis = redis_client.client()
    key = contract.answer_key(job_id, ask_id)
    # The server's asker gives up on the client after MCP_ASK_TIMEOUT_SECONDS and says so.
    deadline = time.monotonic() + settings.MCP_ASK_TIMEOUT_SECONDS + contract.REPLY_GRACE_SECONDS
    while not cancelled.is_set():
        if time.monotonic() > deadline:
            raise ToolError("The server did not pass on the client's answer in time.")
        popped = await redis.blpop([key], timeout=contract.ANSWER_POLL_SECONDS)
        if popped is not None:
            answer = json.loads(popped[1])
            return answer if isinstance(answer, dict) else {}
    raise ToolError("The call was cancelled while it waited for the client's answer.")


def _asker(job_id: str, replies: _Replies, cancelled: asyncio.Event) -> Asker:
    """Asks through the waiting server, which knows the request's era, session and answers so far."""
    numbers = itertools.count(1)

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        ask_id = str(next(numbers))
        if not await replies.reliably("mcp.job.ask", ask=ask_id, request=request):
            raise ToolError("The question could not reach the server waiting for this call.")
        answer = await _answer_to(job_id, ask_id, cancelled)
        if isinstance(answer.get("input_required"), list):
            # The server, which knows the request, answers the round; this run only has to end.
            raise InputRequired({str(key): request for key in answer["input_required"]})
        if isinstance(answer.get("missing_capability"), str):
            raise MissingCapability(answer["missing_capability"])
        if answer.get("as_task") is True:
            raise GoAsync  # the call became a task, which runs the handler anew (AMB-286)
        if isinstance(answer.get("result"), dict):
            return answer["result"]
        raise ToolError(str(answer.get("error") or "The client did not answer."))

    return ask


async def _find_tool(job: dict[str, Any]) -> tuple[TenantInfo | None, Catalog | None, ToolDef | None]:
    tenant = await catalogs.get_tenant(job["tenant_slug"])
    if tenant is None or tenant.id != job["tenant_id"] or not tenant.is_active:
        return tenant, None, None
    catalog = await catalogs.get_catalog(tenant.id)
    tool = catalog.tools_by_name.get(job["tool_name"])
    return tenant, catalog, tool if tool is not None and tool.id == job["tool_id"] else None


async def _watch_cancel(
    job_id: str, cancelled: asyncio.Event, handler: asyncio.Task, replies: _Replies, by: list[str]
) -> None:
    """Poll for a cancellation (its key's value goes to `by`), and leave a sign of life in Redis every
    HEARTBEAT_SECONDS."""
    redis = redis_client.client()
    next_beat = time.monotonic() + contract.HEARTBEAT_SECONDS
    while not handler.done():
        await asyncio.sleep(contract.CANCEL_POLL_SECONDS)
        if time.monotonic() >= next_beat:
            next_beat = time.monotonic() + contract.HEARTBEAT_SECONDS
            try:
                # A key the waiting server reads when the run has been quiet, not a reply: a message a
                # second per run filled a busy Daphne's reply channel (and a dropped beat looked dead).
                await redis.set(contract.alive_key(job_id), "1", ex=contract.ALIVE_KEY_SECONDS)
            except Exception as exc:  # keep running and polling; the next beat may get through
                logger.warning("job %s: could not leave a sign of life: %r", job_id, exc)
        try:
            value = await redis.get(contract.cancel_key(job_id))
            if value is not None:
                by.append(value)
                break
        except Exception as exc:  # keep working; the next poll may succeed
            logger.warning("job %s: could not check for a cancellation: %r", job_id, exc)
    else:
        return
    logger.info("job %s cancelled", job_id)
    cancelled.set()
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        async with asyncio.timeout(contract.CANCEL_GRACE_SECONDS):
            await asyncio.shield(handler)
    await _stop(handler)


async def _stop(handler: asyncio.Task) -> None:
    """Cancel the handler and wait for it to end, cancelling it again while it runs on.

    On Python 3.11 a cancellation can be swallowed below a handler (a library's timeout or lock around
    the await it lands in): one cancel() then left a job counting to its end after its client
    cancelled it, or after its worker was told to stop (seen in CI). Bounded: a handler that ignores
    every cancellation is left to the worker's own shutdown.
    """
    deadline = time.monotonic() + contract.CANCEL_GRACE_SECONDS
    while not handler.done() and time.monotonic() < deadline:
        handler.cancel()
        await asyncio.wait({handler}, timeout=contract.CANCEL_POLL_SECONDS)


def _stopping() -> bool:
    """Whether the running task itself is being cancelled (a worker shutting down), as opposed to the
    handler task, which the job's own cancellation cancels."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _worker_name() -> str:
    # At call time: a prefork child imported this module in its parent, before the fork.
    return f"{socket.gethostname()}:{os.getpid()}"


def _questions(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The requests a question holds: itself, or each of a group asked together (AMB-122)."""
    group = (request.get("params") or {}).get("requests") if request.get("method") == ASK_TOGETHER else None
    return [q for q in group.values() if isinstance(q, dict)] if isinstance(group, dict) else [request]


async def _ended_by_asking(job_id: str, tool: ToolDef, outcome: AskOutcome, elapsed: float) -> str:
    """Record a run whose question ended the call (the server has answered the call already)."""
    if isinstance(outcome, InputRequired):
        # Done, not cancelled or failed: the job did its part of the round, and the call's answer is
        # its question; the client's retry with the answer runs as a new job (and row).
        methods = sorted({str(q.get("method")) for r in outcome.requests.values() for q in _questions(r)})
        detail = (
            f"Asked the client ({', '.join(methods)}): the call returned the question; its retry runs anew."
        )
        status, said = ToolRun.Status.DONE, "asked"
    elif isinstance(outcome, GoAsync):
        detail = "Asked its questions; the call became a task, which runs it anew with the answers."
        status, said = ToolRun.Status.DONE, "asked"
    else:
        capability = outcome.capability if isinstance(outcome, MissingCapability) else "?"
        detail = f"The client did not declare {capability!r}, which the tool asks for (error -32021)."
        status, said = ToolRun.Status.FAILED, "cannot ask"
    await runs.close_run(job_id, (runs.RUNNING,), status, detail)
    logger.info("job %s (tool %s) ended after %.2f s: %s", job_id, tool.name, elapsed, detail)
    return said


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
    return "The tool returned an error."


async def work(job: dict[str, Any]) -> str:
    """Run one job on a worker; return what became of it (for the worker's log and the tests)."""
    job_id = job["id"]
    if time.time() > job["start_by"]:
        logger.warning("job %s (tool %s) dropped: its caller stopped waiting", job_id, job["tool_name"])
        await runs.close_run(
            job_id,
            (runs.QUEUED,),
            ToolRun.Status.NOT_STARTED,
            "A worker received it after its caller gave up.",
        )
        return "expired"
    cancelled_early = await redis_client.client().get(contract.cancel_key(job_id))
    if cancelled_early is not None:
        logger.info("job %s (tool %s) dropped: cancelled before it started", job_id, job["tool_name"])
        operator = contract.admin_canceller(cancelled_early)
        detail = f"Cancelled in the admin by {operator} before it started." if operator else ""
        await runs.close_run(
            job_id,
            (runs.QUEUED,),
            ToolRun.Status.CANCELLED,
            detail or "Cancelled before a worker started it.",
        )
        if operator:  # the caller still waits: tell it
            await _Replies(job).result(
                error_result(f"An operator cancelled this call before it ran ({operator}).")
            )
        return "cancelled"
    if not await database_sync_to_async(runs.claim)(job_id, _worker_name()):
        logger.info("job %s (tool %s) dropped: no longer queued", job_id, job["tool_name"])
        return "expired"
    replies = _Replies(job)
    # Retried like a result: a full reply channel must not crash a job whose row is now running.
    if not await replies.reliably("mcp.job.started"):
        await runs.close_run(
            job_id,
            (runs.RUNNING,),
            ToolRun.Status.LOST,
            "The server waiting for this run never took its start.",
        )
        return "unheard"
    tenant, catalog, tool = await _find_tool(job)
    if tool is None or tenant is None or catalog is None:
        message = f"Tool {job['tool_name']!r} was removed or disabled before a worker could run it."
        await runs.close_run(job_id, (runs.RUNNING,), ToolRun.Status.FAILED, message)
        await replies.result(error_result(message))
        return "missing"
    cancelled = asyncio.Event()

    async def emit(message: dict[str, Any]) -> None:
        if not cancelled.is_set():
            await replies.emit(message)

    ctx = dataclasses.replace(
        contract.context(job, tenant, emit, cancelled, _asker(job_id, replies, cancelled)),
        resources=resources_of(catalog.resources_by_uri),
    )
    started = time.monotonic()
    handler = asyncio.get_running_loop().create_task(
        registry.run_inline(ctx, tool, job.get("arguments") or {})
    )
    cancelled_by: list[str] = []
    watcher = asyncio.get_running_loop().create_task(
        _watch_cancel(job_id, cancelled, handler, replies, cancelled_by)
    )
    try:
        # Waited on, not awaited: a stop of this task lands here and `_stop` passes it on until the
        # handler ends. Awaited, the stop went to the handler once, and a handler that swallowed it
        # counted to its end (CI).
        await asyncio.wait({handler})
        result = handler.result()
    except asyncio.CancelledError:
        if not _stopping():
            result = None  # the job's cancellation (_watch_cancel stopped the handler)
        else:  # this worker is stopping: stop with it
            await _stop(handler)
            if not handler.done() or handler.cancelled() or handler.exception() is not None:
                raise
            result = handler.result()  # it swallowed the stop and finished: kept and sent (below)
    except AskOutcome as outcome:
        return await _ended_by_asking(job_id, tool, outcome, time.monotonic() - started)
    except ProtocolError as failure:
        # Not an isError result: the call answers this JSON-RPC error, a task ends failed (AMB-285).
        await runs.close_run(job_id, (runs.RUNNING,), ToolRun.Status.FAILED, failure.message)
        await replies.reliably(
            "mcp.job.result", result=error_result(failure.message), error=failure.to_error()
        )
        logger.info("job %s (tool %s) failed with protocol error %s", job_id, tool.name, failure.code)
        return "failed"
    finally:
        watcher.cancel()
    elapsed = time.monotonic() - started
    if cancelled.is_set():
        logger.info("job %s (tool %s) stopped after %.2f s: cancelled", job_id, tool.name, elapsed)
        operator = contract.admin_canceller(cancelled_by[0] if cancelled_by else None)
        who = f"in the admin by {operator}" if operator else "by the client"
        await runs.close_run(
            job_id, (runs.RUNNING,), ToolRun.Status.CANCELLED, f"Cancelled {who} after {elapsed:.1f} s."
        )
        if operator:  # a client that cancelled expects no answer (UT-10); this caller still waits
            await replies.result(
                error_result(f"An operator stopped this call after {elapsed:.1f} s ({operator}).")
            )
        return "cancelled"
    assert result is not None
    # The tenant's guardrails on results run where the result is produced (AMB-354): the run's record
    # holds what the caller gets, redacted or blocked.
    guarded = await guardrails.scan(ctx, "tools/call", catalog, tool.name, result, "result", "tool")
    result = error_result(guarded.blocked.message()) if guarded.blocked is not None else guarded.value
    if result.get("isError"):
        await runs.close_run(job_id, (runs.RUNNING,), ToolRun.Status.FAILED, _first_text(result), result)
    else:
        await runs.close_run(job_id, (runs.RUNNING,), ToolRun.Status.DONE, result=result)
    await replies.result(result)
    logger.info("job %s (tool %s) finished in %.2f s", job_id, tool.name, elapsed)
    if _stopping():
        # Told to stop while its handler ran, and the handler swallowed that (it finished anyway): its
        # result is recorded and sent above; the stop goes on up, as it would have.
        raise asyncio.CancelledError
    return "done"
