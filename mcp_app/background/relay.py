"""Background tools: a `tools/call` of a tool with execution "background" runs on a Celery worker.

The server process that received the call (any Daphne process):
  1. opens a channel-layer channel of its own for the job's replies;
  2. enqueues the Celery task `mcp_app.run_tool_job` (by name; mcp_app.background.job) with a JSON job: what a worker needs to rebuild the
     request's context (tenant, tool id, arguments, progress token, log level, caller);
  3. relays the replies: notifications (progress, log messages) go to `ctx.emit`, that is to the
     request's SSE stream; the result ends the wait and goes through the same checks as an inline
     result (output schema, shaping) in `protocol.tools`.
A handler's question (`ctx.elicit`, `ctx.sample`, `ctx.list_roots`) comes back as a reply too: this
process asks it through the asker protocol.tools gives the call (the request's own, so either era
and every rule of protocol.asking apply) and pushes the answer, or the error the handler should get,
onto a Redis list the worker blocks on. A 2026-07-28 question the request brings no answer for ends
the call here (InputRequired, as inline) and the worker's handler with it: no worker waits for a
client's round trip; the retry is a new job (AMB-46).
A cancellation (`notifications/cancelled`, or the session's DELETE) cancels the waiting task; it
sets the job's cancel key in Redis on its way out. The worker polls that key, sets the handler's
`ctx.cancelled` event and, if the handler does not return soon, cancels it. A cancelled job sends
no result (UT-10).

Deadlines, so nothing runs that nobody waits for and no caller waits forever:
  - a worker must start the job within the tool's `worker_wait_seconds` (blank: MCP_BACKGROUND_START_SECONDS)
    of its enqueueing; a caller still waiting after WAITING_NOTICE_SECONDS is told so (a progress
    notification "Waiting for a worker", AMB-114); at the bound it gets an isError result naming the
    wait, and a worker that picks the job up later drops it;
  - once started, the worker enforces the tool's timeout (the same funnel as inline tools) and the
    server waits that long plus REPLY_GRACE_SECONDS before reporting a worker that stopped answering;
  - meanwhile the worker leaves a sign of life in Redis every HEARTBEAT_SECONDS (a key, not a reply:
    replies are for what the client sees); after MCP_BACKGROUND_LIVENESS_SECONDS without a reply the
    server looks at that key, and again every ALIVE_KEY_SECONDS while it is there: a worker killed
    mid-run (or hung) is noticed within the bound plus ALIVE_KEY_SECONDS; the run is marked lost and
    the caller gets an isError result then. Nothing is retried: the claimed row keeps a redelivered job
    (Celery's late acknowledgement) from running twice.
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
import json
import logging
import secrets
import time
from typing import Any

from asgiref.sync import sync_to_async
from celery import current_app
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_app.background import presence, runs
from mcp_app.core.context import Asker, RequestContext
from mcp_app.core.errors import HandlerError, InputRequired, MissingCapability, error_result
from mcp_app.core.notifications import progress
from mcp_app.core.types import ToolDef
from mcp_app.infra import redis_client
from mcp_app.models import ToolRun

logger = logging.getLogger(__name__)

BACKGROUND = "background"
TASK_NAME = "mcp_app.run_tool_job"
# How long past a started job's tool timeout the server waits for the worker's answer.
REPLY_GRACE_SECONDS = 10.0
# How often a worker running a job tells the waiting server it is alive.
HEARTBEAT_SECONDS = 1.0
# How long a worker's last beat stays readable in Redis: a dead worker's key is gone this long after
# its last beat, and a quiet run's server looks again this often.
ALIVE_KEY_SECONDS = 2
# How often a worker checks whether its job was cancelled.
CANCEL_POLL_SECONDS = 0.2
# How long a cancelled handler may take to return after its `cancelled` event is set.
CANCEL_GRACE_SECONDS = 2.0
# How long a worker keeps retrying a result the server's reply channel cannot take (full).
RESULT_SEND_SECONDS = 30.0
CANCEL_KEY_TTL = 3600
# A job's cancel key holds who cancelled it: the client, or an operator in the admin ("admin:<name>").
CANCELLED_BY_CLIENT = "1"
CANCELLED_IN_ADMIN = "admin:"
# How long a worker blocks on Redis at a time for an answer, between checks for a cancellation.
ANSWER_POLL_SECONDS = 0.5
# A call not started by a worker this long after its enqueueing tells its caller it waits for one
# (a free worker starts a job in milliseconds).
WAITING_NOTICE_SECONDS = 1.0
WAITING_FOR_A_WORKER = "Waiting for a worker"


def start_wait_seconds(tool: ToolDef) -> float:
    """How long a call of `tool` waits for a worker to start it (AMB-114)."""
    return float(tool.worker_wait_seconds or settings.MCP_BACKGROUND_START_SECONDS)


def enabled() -> bool:
    """True when background tools go to Celery workers (a broker and a shared channel layer)."""
    return settings.MCP_BACKGROUND_TOOLS == "celery"


def runs_in_background(tool: ToolDef) -> bool:
    return tool.execution == BACKGROUND and enabled()


def cancel_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:cancelled"


def alive_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:alive"


async def _still_alive(job_id: str) -> bool:
    """Whether the worker beat within ALIVE_KEY_SECONDS (its channel messages may have been dropped)."""
    try:
        return bool(await redis_client.client().exists(alive_key(job_id)))
    except Exception:
        logger.warning("could not read the sign of life of background job %s", job_id, exc_info=True)
        return False


def answer_key(job_id: str, ask_id: str) -> str:
    return f"mcp:job:{job_id}:answer:{ask_id}"


def _job(
    ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any], channel: str, job_id: str | None
) -> dict[str, Any]:
    session = ctx.session
    return {
        "id": job_id or secrets.token_urlsafe(16),
        "reply_to": channel,
        "start_by": time.time() + start_wait_seconds(tool),
        "tenant_id": ctx.tenant.id,
        "tenant_slug": ctx.tenant.slug,
        "tool_id": tool.id,
        "tool_name": tool.name,
        "arguments": arguments,
        "protocol_version": ctx.protocol_version,
        "client_capabilities": ctx.client_capabilities,
        "session_id": session.id if session else None,
        "log_level": session.log_level if session else ctx.log_level,
        "user_id": ctx.user_id,
        "client_id": ctx.client_id,
        "scopes": sorted(ctx.scopes) if ctx.scopes is not None else None,
        "request_id": ctx.request_id,
        "progress_token": ctx.progress_token,
        # The call's name across its 2026-07-28 rounds: what a handler asks out of band is keyed on it.
        "call_id": ctx.call_id,
    }


def _enqueue(job: dict[str, Any]) -> None:
    # By name: the caller side never imports the worker side (mcp_app.background.job).
    current_app.send_task(
        TASK_NAME,
        args=[job],
        task_id=job["id"],
        queue=settings.MCP_BACKGROUND_QUEUE,
        # A worker that receives it later discards it unrun (the caller has had its answer).
        expires=max(1.0, job["start_by"] - time.time()),
    )


async def request_cancel(job_id: str) -> None:
    """Tell the worker (whichever runs it, now or later) to stop the job."""
    try:
        await redis_client.client().set(cancel_key(job_id), CANCELLED_BY_CLIENT, ex=CANCEL_KEY_TTL)
    except Exception:
        logger.exception("could not cancel background job %s", job_id)


def cancel_from_admin(job_id: str, who: str) -> None:
    """An operator stops a run: its worker stops it (now, or when it picks it up) and tells the caller.

    Unlike a client's cancellation, the caller is still waiting, so it gets an isError result that
    says who stopped the run (background/worker.py). Raises when Redis cannot be reached.
    """
    redis_client.sync_client().set(cancel_key(job_id), f"{CANCELLED_IN_ADMIN}{who}", ex=CANCEL_KEY_TTL)


def admin_canceller(value: str | None) -> str | None:
    """Who cancelled a job in the admin, from its cancel key's value; None for a client's cancellation."""
    if value and value.startswith(CANCELLED_IN_ADMIN):
        return value[len(CANCELLED_IN_ADMIN) :] or "an operator"
    return None


async def _answer(job_id: str, ask_id: str, answer: dict[str, Any]) -> None:
    key = answer_key(job_id, ask_id)
    try:
        async with redis_client.client().pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(answer))
            # Outlives any wait of the worker's; a worker that died never takes it.
            pipe.expire(key, int(settings.MCP_ASK_TIMEOUT_SECONDS + REPLY_GRACE_SECONDS) + 60)
            await pipe.execute()
    except Exception:
        # The worker's wait ends with the tool's timeout.
        logger.exception("could not pass an answer to background job %s", job_id)


async def _tell_waiting(ctx: RequestContext, tool: ToolDef, start_seconds: float) -> None:
    """The call is still queued: tell its caller (progress 0) whether no worker runs or all are busy."""
    try:
        why = "all are busy" if await presence.aalive() else "none is running"
    except Exception:  # noqa: BLE001 - the notice is advisory; the wait goes on
        logger.warning("could not count the workers for a waiting call", exc_info=True)
        why = "none has started it yet"
    await progress(
        ctx,
        0,
        message=f"{WAITING_FOR_A_WORKER}: {why}. Tool {tool.name!r} waits up to {start_seconds:g} s "
        "for one to start it, then the call ends unrun.",
    )


async def _relay_ask(ask: Asker, job_id: str, event: dict[str, Any]) -> None:
    """Ask the worker's question through the request's asker; hand the worker what came of it.

    Raises InputRequired / MissingCapability (2026-07-28) after telling the worker: the call ends.
    """
    ask_id, request = str(event.get("ask")), event.get("request")
    try:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise TypeError(f"not a request: {request!r}")
        answer: dict[str, Any] = {"result": await ask(request)}
    except HandlerError as exc:  # the client cannot be asked, or did not answer in time
        answer = {"error": exc.message}
    except InputRequired as asked:
        await _answer(job_id, ask_id, {"input_required": list(asked.requests)})
        await runs.note_exchange(
            job_id, request, {"error": "Asked as a 2026-07-28 round: the retry runs anew."}
        )
        raise
    except MissingCapability as missing:
        await _answer(job_id, ask_id, {"missing_capability": missing.capability})
        raise
    except Exception:
        logger.exception("could not ask the client the question of background job %s", job_id)
        answer = {"error": "The server could not put the question to the client."}
    await _answer(job_id, ask_id, answer)
    recorded = {"answer": answer["result"]} if "result" in answer else {"error": answer["error"]}
    await runs.note_exchange(job_id, request if isinstance(request, dict) else {}, recorded)


async def run(
    ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any], ask: Asker, job_id: str | None = None
) -> dict[str, Any]:
    """Run `tool` on a Celery worker and return its CallToolResult; relay its notifications meanwhile.

    The handler's questions are asked with `ask` (the request's asker, protocol.asking); a 2026-07-28
    question without an answer yet raises InputRequired here, as an inline handler's would.
    `job_id` names a run whose ToolRun row its caller already made (a task, protocol.tasks).
    """
    layer = get_channel_layer()
    # The default prefix: channels_redis reads all of a process's "specific" channels from one Redis
    # list under one lock; a channel of another prefix waited behind that reader (replies never came).
    channel = await layer.new_channel()
    job = _job(ctx, tool, arguments, channel, job_id)
    not_queued = error_result(f"Tool {tool.name!r} could not be queued for a worker. Try again later.")
    try:
        if job_id is None:
            await database_sync_to_async(runs.record_queued)(job)
    except Exception:
        logger.exception(
            "could not record background job of tool %s of tenant %s", tool.name, ctx.tenant.slug
        )
        return not_queued
    receiver: asyncio.Task | None = None
    asks: set[asyncio.Task] = set()  # questions of the worker's this process is asking the client
    try:
        try:
            # apply_async talks to the broker synchronously (and may reconnect): keep it off the loop.
            # A cancellation while it runs still reaches the job (below): the worker checks first.
            await sync_to_async(_enqueue, thread_sensitive=False)(job)
        except Exception:
            logger.exception("could not queue background tool %s of tenant %s", tool.name, ctx.tenant.slug)
            await runs.close_run(
                job["id"], (runs.QUEUED,), ToolRun.Status.NOT_STARTED, "The broker did not accept the job."
            )
            return not_queued
        loop = asyncio.get_running_loop()
        start_seconds = start_wait_seconds(tool)
        deadline = loop.time() + start_seconds
        alive_until = deadline  # moved on by every sign of a started worker
        notice_at: float | None = loop.time() + WAITING_NOTICE_SECONDS
        started = False
        while True:
            if receiver is None:
                # One receive at a time, never cancelled on a timeout: channels_redis drops the
                # channel's buffered messages when a receive is cancelled.
                receiver = loop.create_task(layer.receive(channel))
            # While this process waits for the client, the worker waits too: only its silence counts.
            until = alive_until if asks else min(deadline, alive_until)
            if notice_at is not None and not started:
                if loop.time() >= notice_at:
                    notice_at = None
                    await _tell_waiting(ctx, tool, start_seconds)
                    continue
                until = min(until, notice_at)
            wait = max(0.0, until - loop.time())
            done, _ = await asyncio.wait({receiver, *asks}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if not done and not started and notice_at is not None and loop.time() < deadline:
                continue  # the moment to tell the caller it waits (above)
            if not done and started and (asks or loop.time() < deadline) and await _still_alive(job["id"]):
                alive_until = loop.time() + ALIVE_KEY_SECONDS
                continue  # quiet, not dead: its worker beat within ALIVE_KEY_SECONDS
            if not done and started and (asks or loop.time() < deadline):
                silent = settings.MCP_BACKGROUND_LIVENESS_SECONDS
                await asyncio.shield(request_cancel(job["id"]))
                await asyncio.shield(
                    runs.close_run(
                        job["id"],
                        (runs.RUNNING,),
                        ToolRun.Status.LOST,
                        f"The worker sent no sign of life for {silent:g} s (it died or hangs); nothing was retried.",
                    )
                )
                return error_result(
                    f"The worker running tool {tool.name!r} stopped answering (no sign of life for {silent:g} s); "
                    "it may have died. The call was not retried: check its effects before calling again."
                )
            if not done:
                await asyncio.shield(request_cancel(job["id"]))
                if not started:
                    await asyncio.shield(
                        runs.close_run(
                            job["id"],
                            (runs.QUEUED,),
                            ToolRun.Status.NOT_STARTED,
                            f"No worker started it within {start_seconds:g} s.",
                        )
                    )
                    return error_result(
                        f"No worker started tool {tool.name!r} within {start_seconds:g} seconds. "
                        "The workers are down or busy; the call did not run. Try again later."
                    )
                await asyncio.shield(
                    runs.close_run(
                        job["id"],
                        (runs.RUNNING,),
                        ToolRun.Status.LOST,
                        "The worker stopped answering; the caller gave up.",
                    )
                )
                return error_result(f"The worker running tool {tool.name!r} stopped answering.")
            for asked in done - {receiver}:
                asks.discard(asked)
                asked.result()  # InputRequired / MissingCapability end the call; the worker knows
                deadline = max(deadline, loop.time() + REPLY_GRACE_SECONDS)
            if receiver not in done:
                continue
            event, receiver = receiver.result(), None
            if event.get("job") != job["id"]:
                continue
            kind = event.get("type")
            if started:
                alive_until = loop.time() + settings.MCP_BACKGROUND_LIVENESS_SECONDS
            if kind == "mcp.job.started" and not started:
                started = True
                deadline = loop.time() + tool.timeout_seconds + REPLY_GRACE_SECONDS
                alive_until = loop.time() + settings.MCP_BACKGROUND_LIVENESS_SECONDS
            elif kind == "mcp.job.emit" and isinstance(event.get("message"), dict):
                message = event["message"]
                await ctx.emit(message)
                if message.get("method") == "notifications/progress" and isinstance(
                    message.get("params"), dict
                ):
                    await runs.note_progress(job["id"], message["params"])  # the admin's live view
            elif kind == "mcp.job.ask":
                asks.add(loop.create_task(_relay_ask(ask, job["id"], event)))
            elif kind == "mcp.job.result":
                result = event.get("result")
                if not isinstance(result, dict):
                    return error_result(f"Tool {tool.name!r} failed with an internal error.")
                return result
    except asyncio.CancelledError:
        await asyncio.shield(request_cancel(job["id"]))
        # A running job records its own end when the worker stops it.
        await asyncio.shield(
            runs.close_run(
                job["id"], (runs.QUEUED,), ToolRun.Status.CANCELLED, "Cancelled before a worker started it."
            )
        )
        raise
    finally:
        for task in (receiver, *asks):
            if task is not None:
                task.cancel()
