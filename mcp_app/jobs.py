"""Background tools: a `tools/call` of a tool with execution "background" runs on a Celery worker.

The server process that received the call (any Daphne process):
  1. opens a channel-layer channel of its own for the job's replies;
  2. enqueues `mcp_app.tasks.run_tool_job` with a JSON job: what a worker needs to rebuild the
     request's context (tenant, tool id, arguments, progress token, log level, caller);
  3. relays the replies: notifications (progress, log messages) go to `ctx.emit`, that is to the
     request's SSE stream; the result ends the wait and goes through the same checks as an inline
     result (output schema, shaping) in `protocol.tools`.
A cancellation (`notifications/cancelled`, or the session's DELETE) cancels the waiting task; it
sets the job's cancel key in Redis on its way out. The worker polls that key, sets the handler's
`ctx.cancelled` event and, if the handler does not return soon, cancels it. A cancelled job sends
no result (UT-10).

Deadlines, so nothing runs that nobody waits for and no caller waits forever:
  - a worker must start the job within MCP_BACKGROUND_START_SECONDS of its enqueueing; otherwise the
    caller gets an isError result naming the wait, and a worker that picks it up later drops it;
  - once started, the worker enforces the tool's timeout (the same funnel as inline tools) and the
    server waits that long plus REPLY_GRACE_SECONDS before reporting a worker that stopped answering.
Progress is best effort (a full reply channel drops it); the result is retried until it is taken.

Every background call has a ToolRun row (the admin lists them): the server creates it (queued),
a worker claims it (queued → running: a job whose row moved on, because its caller gave up or
cancelled, is dropped unrun), and whoever ends the run writes how (done, failed, cancelled, not
started, lost). Rows older than MCP_TOOL_RUN_RETENTION_DAYS are deleted now and then.

Without a broker (embedded defaults), MCP_BACKGROUND_TOOLS is "inline": the same tools run in the
server process, exactly as inline tools do, without ToolRun rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from mcp_app import catalog as catalogs
from mcp_app.catalog_types import ToolDef
from mcp_app.protocol.context import RequestContext, SessionState
from mcp_app.transport import redis_client

logger = logging.getLogger(__name__)

BACKGROUND = "background"
# How long past a started job's tool timeout the server waits for the worker's answer.
REPLY_GRACE_SECONDS = 10.0
# How often a worker checks whether its job was cancelled.
CANCEL_POLL_SECONDS = 0.2
# How long a cancelled handler may take to return after its `cancelled` event is set.
CANCEL_GRACE_SECONDS = 2.0
# How long a worker keeps retrying a result the server's reply channel cannot take (full).
RESULT_SEND_SECONDS = 30.0
CANCEL_KEY_TTL = 3600


def enabled() -> bool:
    """True when background tools go to Celery workers (a broker and a shared channel layer)."""
    return settings.MCP_BACKGROUND_TOOLS == "celery"


def runs_in_background(tool: ToolDef) -> bool:
    return tool.execution == BACKGROUND and enabled()


def cancel_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:cancelled"


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


# --- ToolRun rows (synchronous: called through database_sync_to_async) ----------------------

PURGE_EVERY_SECONDS = 3600.0
_last_purge: float | None = None  # monotonic time of this process's last purge


def _record_queued(job: dict[str, Any]) -> None:
    from mcp_app.models import ToolRun

    ToolRun.objects.create(
        job_id=job["id"],
        tenant_id=job["tenant_id"],
        tool_id=job["tool_id"],
        tool_name=job["tool_name"],
        user_id=job.get("user_id"),
        client_id=job.get("client_id") or "",
        session_id=job.get("session_id") or "",
    )
    _maybe_purge()


def _maybe_purge() -> None:
    global _last_purge
    now = time.monotonic()
    if _last_purge is not None and now - _last_purge < PURGE_EVERY_SECONDS:
        return
    _last_purge = now
    from mcp_app.models import ToolRun

    cutoff = timezone.now() - timedelta(days=settings.MCP_TOOL_RUN_RETENTION_DAYS)
    ToolRun.objects.filter(queued_at__lt=cutoff).delete()


def _claim(job_id: str, worker: str) -> bool:
    """Move the run from queued to running; False when it is no longer queued (given up, cancelled)."""
    from mcp_app.models import ToolRun

    return bool(
        ToolRun.objects.filter(job_id=job_id, status=ToolRun.Status.QUEUED).update(
            status=ToolRun.Status.RUNNING, started_at=timezone.now(), worker=worker[:255]
        )
    )


def _close(job_id: str, from_statuses: tuple[str, ...], status: str, detail: str = "") -> bool:
    from mcp_app.models import ToolRun

    return bool(
        ToolRun.objects.filter(job_id=job_id, status__in=from_statuses).update(
            status=status, finished_at=timezone.now(), detail=detail[:2000]
        )
    )


async def close_run(job_id: str, from_statuses: tuple[str, ...], status: str, detail: str = "") -> bool:
    """Record how a run ended, if it is still in one of `from_statuses`; never raises."""
    try:
        return await database_sync_to_async(_close)(job_id, from_statuses, status, detail)
    except Exception:
        logger.exception("could not record the end (%s) of background job %s", status, job_id)
        return False


QUEUED, RUNNING = "queued", "running"


# --- the server side ----------------------------------------------------------------------


def _job(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any], channel: str) -> dict[str, Any]:
    session = ctx.session
    return {
        "id": secrets.token_urlsafe(16),
        "reply_to": channel,
        "start_by": time.time() + settings.MCP_BACKGROUND_START_SECONDS,
        "tenant_id": ctx.tenant.id,
        "tenant_slug": ctx.tenant.slug,
        "tool_id": tool.id,
        "tool_name": tool.name,
        "arguments": arguments,
        "protocol_version": ctx.protocol_version,
        "client_capabilities": ctx.client_capabilities,
        "session_id": session.id if session else None,
        "log_level": session.log_level if session else None,
        "user_id": ctx.user_id,
        "client_id": ctx.client_id,
        "scopes": sorted(ctx.scopes) if ctx.scopes is not None else None,
        "request_id": ctx.request_id,
        "progress_token": ctx.progress_token,
    }


def _enqueue(job: dict[str, Any]) -> None:
    from mcp_app.tasks import run_tool_job

    run_tool_job.apply_async(
        args=[job],
        task_id=job["id"],
        queue=settings.MCP_BACKGROUND_QUEUE,
        # A worker that receives it later discards it unrun (the caller has had its answer).
        expires=settings.MCP_BACKGROUND_START_SECONDS,
    )


async def request_cancel(job_id: str) -> None:
    """Tell the worker (whichever runs it, now or later) to stop the job."""
    try:
        await redis_client.client().set(cancel_key(job_id), "1", ex=CANCEL_KEY_TTL)
    except Exception:
        logger.exception("could not cancel background job %s", job_id)


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run `tool` on a Celery worker and return its CallToolResult; relay its notifications meanwhile."""
    layer = get_channel_layer()
    # The default prefix: channels_redis reads all of a process's "specific" channels from one Redis
    # list under one lock; a channel of another prefix waited behind that reader (replies never came).
    channel = await layer.new_channel()
    job = _job(ctx, tool, arguments, channel)
    not_queued = error_result(f"Tool {tool.name!r} could not be queued for a worker. Try again later.")
    try:
        await database_sync_to_async(_record_queued)(job)
    except Exception:
        logger.exception(
            "could not record background job of tool %s of tenant %s", tool.name, ctx.tenant.slug
        )
        return not_queued
    receiver: asyncio.Task | None = None
    try:
        try:
            # apply_async talks to the broker synchronously (and may reconnect): keep it off the loop.
            # A cancellation while it runs still reaches the job (below): the worker checks first.
            await sync_to_async(_enqueue, thread_sensitive=False)(job)
        except Exception:
            logger.exception("could not queue background tool %s of tenant %s", tool.name, ctx.tenant.slug)
            await close_run(job["id"], (QUEUED,), "not_started", "The broker did not accept the job.")
            return not_queued
        loop = asyncio.get_running_loop()
        start_seconds = settings.MCP_BACKGROUND_START_SECONDS
        deadline = loop.time() + start_seconds
        started = False
        while True:
            if receiver is None:
                # One receive at a time, never cancelled on a timeout: channels_redis drops the
                # channel's buffered messages when a receive is cancelled.
                receiver = loop.create_task(layer.receive(channel))
            done, _ = await asyncio.wait({receiver}, timeout=max(0.0, deadline - loop.time()))
            if not done:
                await asyncio.shield(request_cancel(job["id"]))
                if not started:
                    await asyncio.shield(
                        close_run(
                            job["id"],
                            (QUEUED,),
                            "not_started",
                            f"No worker started it within {start_seconds:g} s.",
                        )
                    )
                    return error_result(
                        f"No worker started tool {tool.name!r} within {start_seconds:g} seconds. "
                        "The server is busy or its workers are down; try again later."
                    )
                await asyncio.shield(
                    close_run(
                        job["id"], (RUNNING,), "lost", "The worker stopped answering; the caller gave up."
                    )
                )
                return error_result(f"The worker running tool {tool.name!r} stopped answering.")
            event, receiver = receiver.result(), None
            if event.get("job") != job["id"]:
                continue
            kind = event.get("type")
            if kind == "mcp.job.started" and not started:
                started = True
                deadline = loop.time() + tool.timeout_seconds + REPLY_GRACE_SECONDS
            elif kind == "mcp.job.emit" and isinstance(event.get("message"), dict):
                await ctx.emit(event["message"])
            elif kind == "mcp.job.result":
                result = event.get("result")
                if not isinstance(result, dict):
                    return error_result(f"Tool {tool.name!r} failed with an internal error.")
                return result
    except asyncio.CancelledError:
        await asyncio.shield(request_cancel(job["id"]))
        # A running job records its own end when the worker stops it.
        await asyncio.shield(
            close_run(job["id"], (QUEUED,), "cancelled", "Cancelled before a worker started it.")
        )
        raise
    finally:
        if receiver is not None:
            receiver.cancel()


# --- the worker side ----------------------------------------------------------------------


class _Replies:
    """Sends a job's replies to the server process waiting for them."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job_id = job["id"]
        self.channel = job["reply_to"]
        self.layer = get_channel_layer()

    async def send(self, kind: str, **fields: Any) -> None:
        await self.layer.send(self.channel, {"type": kind, "job": self.job_id, **fields})

    async def emit(self, message: dict[str, Any]) -> None:
        try:
            await self.send("mcp.job.emit", message=message)
        except ChannelFull:
            logger.debug("job %s: reply channel full, a notification was dropped", self.job_id)

    async def result(self, result: dict[str, Any]) -> None:
        deadline = time.monotonic() + RESULT_SEND_SECONDS
        delay = 0.05
        while True:
            try:
                await self.send("mcp.job.result", result=result)
                return
            except ChannelFull:
                if time.monotonic() > deadline:
                    logger.error("job %s: the server never took the result", self.job_id)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)


def _context(job: dict[str, Any], tenant: Any, emit: Any, cancelled: asyncio.Event) -> RequestContext:
    session = None
    if job.get("session_id"):
        session = SessionState(
            id=job["session_id"],
            tenant_id=tenant.id,
            protocol_version=job["protocol_version"],
            client_capabilities=job.get("client_capabilities") or {},
            log_level=job.get("log_level"),
            initialized=True,
            user_id=job.get("user_id"),
            client_id=job.get("client_id"),
        )
    scopes = job.get("scopes")
    return RequestContext(
        tenant=tenant,
        protocol_version=job["protocol_version"],
        session=session,
        client_capabilities=job.get("client_capabilities") or {},
        user_id=job.get("user_id"),
        client_id=job.get("client_id"),
        scopes=frozenset(scopes) if scopes is not None else None,
        request_id=job.get("request_id"),
        progress_token=job.get("progress_token"),
        emit=emit,
        cancelled=cancelled,
    )


async def _find_tool(job: dict[str, Any]) -> tuple[Any, ToolDef | None]:
    tenant = await catalogs.get_tenant(job["tenant_slug"])
    if tenant is None or tenant.id != job["tenant_id"] or not tenant.is_active:
        return tenant, None
    catalog = await catalogs.get_catalog(tenant.id)
    tool = catalog.tools_by_name.get(job["tool_name"])
    return tenant, tool if tool is not None and tool.id == job["tool_id"] else None


async def _watch_cancel(job_id: str, cancelled: asyncio.Event, handler: asyncio.Task) -> None:
    redis = redis_client.client()
    while not handler.done():
        await asyncio.sleep(CANCEL_POLL_SECONDS)
        try:
            if await redis.exists(cancel_key(job_id)):
                break
        except Exception as exc:  # keep working; the next poll may succeed
            logger.warning("job %s: could not check for a cancellation: %r", job_id, exc)
    else:
        return
    logger.info("job %s cancelled", job_id)
    cancelled.set()
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        async with asyncio.timeout(CANCEL_GRACE_SECONDS):
            await asyncio.shield(handler)
    handler.cancel()


def _worker_name() -> str:
    # At call time: a prefork child imported this module in its parent, before the fork.
    return f"{socket.gethostname()}:{os.getpid()}"


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
    return "The tool returned an error."


async def work(job: dict[str, Any]) -> str:
    """Run one job on a worker; return what became of it (for the worker's log and the tests)."""
    from mcp_app.handlers import registry

    job_id = job["id"]
    if time.time() > job["start_by"]:
        logger.warning("job %s (tool %s) dropped: its caller stopped waiting", job_id, job["tool_name"])
        await close_run(job_id, (QUEUED,), "not_started", "A worker received it after its caller gave up.")
        return "expired"
    if await redis_client.client().exists(cancel_key(job_id)):
        logger.info("job %s (tool %s) dropped: cancelled before it started", job_id, job["tool_name"])
        await close_run(job_id, (QUEUED,), "cancelled", "Cancelled before a worker started it.")
        return "cancelled"
    if not await database_sync_to_async(_claim)(job_id, _worker_name()):
        logger.info("job %s (tool %s) dropped: no longer queued", job_id, job["tool_name"])
        return "expired"
    replies = _Replies(job)
    await replies.send("mcp.job.started")
    tenant, tool = await _find_tool(job)
    if tool is None:
        message = f"Tool {job['tool_name']!r} was removed or disabled before a worker could run it."
        await close_run(job_id, (RUNNING,), "failed", message)
        await replies.result(error_result(message))
        return "missing"
    cancelled = asyncio.Event()

    async def emit(message: dict[str, Any]) -> None:
        if not cancelled.is_set():
            await replies.emit(message)

    ctx = _context(job, tenant, emit, cancelled)
    started = time.monotonic()
    handler = asyncio.get_running_loop().create_task(
        registry.run_inline(ctx, tool, job.get("arguments") or {})
    )
    watcher = asyncio.get_running_loop().create_task(_watch_cancel(job_id, cancelled, handler))
    try:
        result = await handler
    except asyncio.CancelledError:
        result = None
    finally:
        watcher.cancel()
    elapsed = time.monotonic() - started
    if cancelled.is_set():
        logger.info("job %s (tool %s) stopped after %.2f s: cancelled", job_id, tool.name, elapsed)
        await close_run(job_id, (RUNNING,), "cancelled", f"Cancelled by the client after {elapsed:.1f} s.")
        return "cancelled"
    assert result is not None
    if result.get("isError"):
        await close_run(job_id, (RUNNING,), "failed", _first_text(result))
    else:
        await close_run(job_id, (RUNNING,), "done")
    await replies.result(result)
    logger.info("job %s (tool %s) finished in %.2f s", job_id, tool.name, elapsed)
    return "done"
