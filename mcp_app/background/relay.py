"""Background tools: a `tools/call` of a tool with execution "background" runs on a Celery worker.

Longer than 400 lines: the job it builds, the questions it relays and the phases of the wait are one
side of a run, read together (what the worker side shares with it is in background/contract.py).

The server process that received the call (any Daphne process):
  1. opens a channel-layer channel of its own for the job's replies;
  2. enqueues the Celery task `mcp_app.run_tool_job` (by name; background.job) with a JSON job: what
     a worker needs to rebuild the request's context (tenant, tool id, arguments, progress token,
     log level, caller);
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

Deadlines, so nothing runs that nobody waits for and no caller waits forever: a worker must start
the job within the tool's `worker_wait_seconds` (blank: MCP_BACKGROUND_START_SECONDS), the job
carries that expiry and a worker that receives it later drops it; once started, the worker enforces
the tool's timeout (the inline funnel) and leaves a sign of life in Redis every HEARTBEAT_SECONDS (a
key, not a reply: replies are for what the client sees). This side is a small state machine (Phase,
_Relay): its phases, each with one deadline, and every way a relayed run ends are listed there.
Nothing is retried: the claimed row keeps a redelivered job (Celery's late ack) from running twice.
Progress is best effort (a full reply channel drops it); the result is retried until it is taken.

Every background call has a ToolRun row (the admin lists them): the server creates it (queued),
a worker claims it (queued → running: a job whose row moved on, because its caller gave up or
cancelled, is dropped unrun), and whoever ends the run writes how (done, failed, cancelled, not
started, lost). Rows older than MCP_TOOL_RUN_RETENTION_DAYS are deleted now and then.

A process lost mid-call leaves its relay to whichever process its client resumes the stream on
(AMB-369): every reply is also kept in the job's Redis stream (background/contract.py), and each one
relayed to a legacy POST's stream is stored with marks naming the job and that reply (RelayingEmit).
The process that takes the stream over (streams/takeover.py) calls `follow`: the same relay, reading
the job's stream from its start, its replies up to the mark taken as relayed already (a "started"
among them still moves the phase), the later ones relayed as they come.

Without a broker (embedded defaults), MCP_BACKGROUND_TOOLS is "inline": the same tools run in the
server process, exactly as inline tools do, without ToolRun rows.

"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import math
import secrets
import time
from typing import Any, cast

from asgiref.sync import sync_to_async
from celery import current_app
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_app.background import contract, presence, runs
from mcp_app.core.context import RELAYED_AFTER, RELAYED_JOB, Asker, RelayingEmit, RequestContext
from mcp_app.core.errors import (
    GoAsync,
    HandlerError,
    InputRequired,
    MissingCapability,
    ProtocolError,
    error_result,
)
from mcp_app.core.notifications import progress
from mcp_app.core.types import TenantInfo, ToolDef
from mcp_app.infra import redis_client
from mcp_app.models import ToolRun

logger = logging.getLogger(__name__)

BACKGROUND = "background"
# A call not started by a worker this long after its enqueueing tells its caller it waits for one
# (a free worker starts a job in milliseconds).
WAITING_NOTICE_SECONDS = 1.0
WAITING_FOR_A_WORKER = "Waiting for a worker"
# How often a relay taken over reads the job's stream (it has no channel: its replies went to the lost one).
FOLLOW_POLL_SECONDS = 0.1


def start_wait_seconds(tool: ToolDef) -> float:
    """How long a call of `tool` waits for a worker to start it (AMB-114)."""
    return float(tool.worker_wait_seconds or settings.MCP_BACKGROUND_START_SECONDS)


def enabled() -> bool:
    """True when background tools go to Celery workers (a broker and a shared channel layer)."""
    return settings.MCP_BACKGROUND_TOOLS == "celery"


def runs_in_background(tool: ToolDef) -> bool:
    return tool.execution == BACKGROUND and enabled()


async def _still_alive(job_id: str) -> bool:
    """Whether the worker beat within ALIVE_KEY_SECONDS (its channel messages may have been dropped)."""
    try:
        return bool(await redis_client.client().exists(contract.alive_key(job_id)))
    except Exception:
        logger.warning("could not read the sign of life of background job %s", job_id, exc_info=True)
        return False


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
        "subject": ctx.subject,
        "scopes": sorted(ctx.scopes) if ctx.scopes is not None else None,
        "request_id": ctx.request_id,
        "progress_token": ctx.progress_token,
        # The call's name across its 2026-07-28 rounds: what a handler asks out of band is keyed on it.
        "call_id": ctx.call_id,
    }


def _enqueue(job: dict[str, Any]) -> None:
    # By name: the caller side never imports the worker side (mcp_app.background.job).
    current_app.send_task(
        contract.TASK_NAME,
        args=[job],
        task_id=job["id"],
        queue=settings.MCP_BACKGROUND_QUEUE,
        # A worker that receives it later discards it unrun (the caller has had its answer).
        expires=max(1.0, job["start_by"] - time.time()),
    )


async def _answer(job_id: str, ask_id: str, answer: dict[str, Any]) -> None:
    key = contract.answer_key(job_id, ask_id)
    try:
        async with redis_client.client().pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(answer))
            # Outlives any wait of the worker's; a worker that died never takes it.
            pipe.expire(key, int(settings.MCP_ASK_TIMEOUT_SECONDS + contract.REPLY_GRACE_SECONDS) + 60)
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
        asked_request = cast(dict[str, Any], request)  # ask() ran: it is a request (checked above)
        await runs.note_exchange(
            job_id, asked_request, {"error": "Asked as a 2026-07-28 round: the retry runs anew."}
        )
        raise
    except MissingCapability as missing:
        await _answer(job_id, ask_id, {"missing_capability": missing.capability})
        raise
    except GoAsync:
        # Its questions are asked: the call becomes a task, which runs it anew (AMB-286).
        await _answer(job_id, ask_id, {"as_task": True})
        raise
    except Exception:
        logger.exception("could not ask the client the question of background job %s", job_id)
        answer = {"error": "The server could not put the question to the client."}
    await _answer(job_id, ask_id, answer)
    recorded = {"answer": answer["result"]} if "result" in answer else {"error": answer["error"]}
    await runs.note_exchange(job_id, request if isinstance(request, dict) else {}, recorded)


class Phase(enum.Enum):
    """Where a relayed run is. Each phase has one deadline (`_Relay.deadline`) and one thing that
    happens when it passes with no reply (`_Relay._deadline_passed`)."""

    # Enqueued, no worker has started it. Deadline: WAITING_NOTICE_SECONDS after the enqueueing (or
    # the start bound, if that comes first). Then the caller is told it waits for a worker: WAITING.
    QUEUED = "queued"
    # Still queued, the caller told so. Deadline: the start bound. Then the run ends NOT STARTED.
    WAITING = "waiting"
    # A worker started it. Deadline: the reply bound (the tool's timeout plus REPLY_GRACE_SECONDS past
    # the start) or the worker's silence, whichever comes first. At the reply bound the caller GIVES
    # UP; at the silence the worker's sign of life in Redis is read: there, the wait goes on; gone,
    # the run is LOST.
    RUNNING = "running"
    # Running, and this process asks the client a question of the worker's (the worker waits too).
    # Deadline: the worker's silence only; each answer leaves the reply bound REPLY_GRACE_SECONDS
    # more at least. Back to RUNNING when no question is open.
    ASKING = "asking"


class _Relay:
    """One background call, from its enqueueing to its end, as seen by the process that received it.

    It waits for one thing at a time: the worker's next reply (one receive, never cancelled on a
    timeout: channels_redis drops the channel's buffered messages when a receive is cancelled), an
    answer of the client's to a question it asks, or the phase's deadline. Every reply of the run's
    worker, in any phase, is relayed: "started" ends the queue (RUNNING), a notification goes to
    the caller, a question is asked (ASKING), the result ends the call.

    The ends of a relayed run (each returns the call's result or raises; a ToolRun row records it):
      - the result: the worker's CallToolResult, or "failed with an internal error" for a result
        that is not an object (the worker writes the row);
      - NOT QUEUED: the row could not be written, or the broker refused the job ("could not be
        queued"; the row, if any, not_started);
      - NOT STARTED: no worker started it within the start bound (isError; row not_started; its
        cancel key set, and a worker that receives it later drops it unrun);
      - LOST: the worker sent nothing and left no sign of life for MCP_BACKGROUND_LIVENESS_SECONDS
        (or ALIVE_KEY_SECONDS after its last sign); it died or hangs (isError; row lost; cancel key);
      - GAVE UP: the reply bound passed while the worker still seemed alive (isError "stopped
        answering"; row lost; cancel key);
      - CANCELLED: the caller's task was cancelled (notifications/cancelled, the session's DELETE):
        the cancel key is set, a queued row becomes cancelled (a running job's worker records its
        own end), and the cancellation goes on up: no response;
      - a question that ends the call: a 2026-07-28 question with no answer yet (InputRequired) or a
        capability the client lacks (MissingCapability) is raised, as an inline handler's would be;
        the worker was told and ends its handler.
    """

    def __init__(
        self, ctx: RequestContext, tool: ToolDef, ask: Asker, job: dict[str, Any], layer: Any
    ) -> None:
        self.ctx, self.tool, self.ask, self.job, self.layer = ctx, tool, ask, job, layer
        self.id: str = job["id"]
        self.channel: str = job["reply_to"]
        self.loop = asyncio.get_running_loop()
        self.start_seconds = start_wait_seconds(tool)
        self.phase = Phase.QUEUED
        # The phases' bounds, in loop time; the deadline is the current phase's.
        self.notice_at = self.start_by = self.reply_by = self.silent_at = math.inf
        self.receiver: asyncio.Task | None = None
        self.asks: set[asyncio.Task] = set()  # questions of the worker's this process is asking the client
        # Taken over (`follow`): where the next read of the job's stream starts, and the mark up to which
        # its replies are stored already. None: the replies come on this process's channel.
        self.read_from: str | None = None
        self.relayed_until = "0"
        # The job as marked on the stream: what a takeover needs, its arguments left out.
        self.marked = json.dumps({k: v for k, v in job.items() if k != "arguments"}, separators=(",", ":"))

    @property
    def deadline(self) -> float:
        match self.phase:
            case Phase.QUEUED:
                return min(self.notice_at, self.start_by)
            case Phase.WAITING:
                return self.start_by
            case Phase.RUNNING:
                return min(self.reply_by, self.silent_at)
            case Phase.ASKING:
                # While this process waits for the client, the worker waits too: only its silence counts.
                return self.silent_at

    async def run(self, row_exists: bool) -> dict[str, Any]:
        not_queued = error_result(
            f"Tool {self.tool.name!r} could not be queued for a worker. Try again later."
        )
        try:
            if not row_exists:
                await database_sync_to_async(runs.record_queued)(self.job)
        except Exception:
            logger.exception(
                "could not record background job of tool %s of tenant %s",
                self.tool.name,
                self.ctx.tenant.slug,
            )
            return not_queued
        try:
            try:
                # apply_async talks to the broker synchronously (and may reconnect): keep it off the loop.
                # A cancellation while it runs still reaches the job (below): the worker checks first.
                await sync_to_async(_enqueue, thread_sensitive=False)(self.job)
            except Exception:
                logger.exception(
                    "could not queue background tool %s of tenant %s", self.tool.name, self.ctx.tenant.slug
                )
                await runs.close_run(
                    self.id, (runs.QUEUED,), ToolRun.Status.NOT_STARTED, "The broker did not accept the job."
                )
                return not_queued
            now = self.loop.time()
            self.start_by = now + self.start_seconds
            self.notice_at = now + WAITING_NOTICE_SECONDS
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        return await self.relay()

    async def follow(self, relayed_until: str) -> dict[str, Any]:
        """Relay on a run another process relayed until it was lost: its replies after `relayed_until`."""
        self.read_from, self.relayed_until = "0-0", relayed_until
        # Its caller was told it waits, if it did; its start bound is the job's (a wall-clock time).
        self.phase = Phase.WAITING
        self.start_by = self.loop.time() + max(0.0, self.job["start_by"] - time.time())
        return await self.relay()

    async def relay(self) -> dict[str, Any]:
        try:
            return await self._relay()
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        finally:
            for task in (self.receiver, *self.asks):
                if task is not None:
                    task.cancel()

    async def _cancelled(self) -> None:
        await asyncio.shield(contract.request_cancel(self.id))
        # A running job records its own end when the worker stops it.
        await asyncio.shield(
            runs.close_run(
                self.id, (runs.QUEUED,), ToolRun.Status.CANCELLED, "Cancelled before a worker started it."
            )
        )

    async def _receive(self) -> list[dict[str, Any]]:
        """The worker's next replies: from this process's channel, or (taken over) the job's stream."""
        if self.read_from is None:
            return [await self.layer.receive(self.channel)]
        # Polled, not a blocking read: a takeover is rare, and a blocking read would hold one of the
        # process's pooled Redis connections for the whole run.
        while True:
            found = await redis_client.client().xread(
                {contract.replies_key(self.id): self.read_from}, count=100
            )
            entries = found[0][1] if found else []
            if entries:
                self.read_from = entries[-1][0]
                return [{**json.loads(fields["reply"]), "reply": entry} for entry, fields in entries]
            await asyncio.sleep(FOLLOW_POLL_SECONDS)

    async def _emit(self, message: dict[str, Any], reply: str | None = None) -> None:
        """Emit to the caller; on a stream that outlives this process, marked for a takeover (AMB-369)."""
        emit = self.ctx.emit
        if not isinstance(emit, RelayingEmit):
            await emit(message)
            return
        marks = {RELAYED_JOB + self.id: self.marked}
        if reply is not None:
            marks[RELAYED_AFTER + self.id] = reply
        await emit.relayed(message, marks)

    async def _relay(self) -> dict[str, Any]:
        this = asyncio.current_task()
        while True:
            if this is not None and this.cancelling():
                # Cancelled, and the CancelledError was swallowed below (Python 3.11: a library's
                # timeout or lock around the await it landed in): the call still ends as cancelled,
                # and the worker is told (run's handler), or the job would run to its end.
                raise asyncio.CancelledError
            if self.receiver is None:
                # One receive at a time, never cancelled on a timeout: channels_redis drops the
                # channel's buffered messages when a receive is cancelled.
                self.receiver = self.loop.create_task(self._receive())
            wait = max(0.0, self.deadline - self.loop.time())
            # asyncio.wait, not wait_for: it cancels nothing on a timeout, and (Python 3.11) wait_for
            # can swallow a cancellation of this task.
            done, _ = await asyncio.wait(
                {self.receiver, *self.asks}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                if (end := await self._deadline_passed()) is not None:
                    return end
                continue
            for asked in done - {self.receiver}:
                self._answered(asked)
            if self.receiver in done:
                replies, self.receiver = self.receiver.result(), None
                for event in replies:
                    if (end := await self._reply(event)) is not None:
                        return end

    async def _deadline_passed(self) -> dict[str, Any] | None:
        """The phase's deadline passed with no reply: its end, or None when the wait goes on."""
        match self.phase:
            case Phase.QUEUED if self.loop.time() < self.start_by:
                if self.loop.time() >= self.notice_at:  # else woken a hair early: wait on
                    # Marked: a stream whose only event is this notice is still taken over.
                    await _tell_waiting(self.ctx.but(emit=self._emit), self.tool, self.start_seconds)
                    self.phase = Phase.WAITING
                return None
            case Phase.QUEUED | Phase.WAITING:
                return await self._not_started()
            case Phase.RUNNING | Phase.ASKING:
                if self._past_reply_bound():
                    return await self._gave_up()
                if await _still_alive(self.id):
                    # Quiet, not dead: its worker beat within ALIVE_KEY_SECONDS; look again then.
                    self.silent_at = self.loop.time() + contract.ALIVE_KEY_SECONDS
                    return None
                if self._past_reply_bound():  # it passed while Redis answered
                    return await self._gave_up()
                return await self._lost()

    def _past_reply_bound(self) -> bool:
        return self.phase is Phase.RUNNING and self.loop.time() >= self.reply_by

    def _answered(self, asked: asyncio.Task) -> None:
        """A question the client answered (or could not): the worker has what came of it."""
        self.asks.discard(asked)
        asked.result()  # InputRequired / MissingCapability end the call; the worker knows
        self.reply_by = max(self.reply_by, self.loop.time() + contract.REPLY_GRACE_SECONDS)
        if self.phase is Phase.ASKING and not self.asks:
            self.phase = Phase.RUNNING

    async def _reply(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """One reply on the run's channel: the call's result if it ends the call, else None."""
        if event.get("job") != self.id:
            return None
        reply = event.get("reply") if isinstance(event.get("reply"), str) else None
        # Taken over: a reply up to the mark reached the caller through the lost process already.
        relayed = reply is not None and not contract.reply_after(reply, self.relayed_until)
        if self.phase in (Phase.RUNNING, Phase.ASKING):
            # Any reply is a sign of life (an older worker's "mcp.job.alive" is nothing else).
            self.silent_at = self.loop.time() + settings.MCP_BACKGROUND_LIVENESS_SECONDS
        match event.get("type"):
            case "mcp.job.started" if self.phase in (Phase.QUEUED, Phase.WAITING):
                now = self.loop.time()
                self.reply_by = now + self.tool.timeout_seconds + contract.REPLY_GRACE_SECONDS
                self.silent_at = now + settings.MCP_BACKGROUND_LIVENESS_SECONDS
                self.phase = Phase.ASKING if self.asks else Phase.RUNNING
            case "mcp.job.emit" if isinstance(event.get("message"), dict) and not relayed:
                message = event["message"]
                await self._emit(message, reply)
                if message.get("method") == "notifications/progress" and isinstance(
                    message.get("params"), dict
                ):
                    await runs.note_progress(self.id, message["params"])  # the admin's live view
            case "mcp.job.ask" if not relayed:
                self.asks.add(self.loop.create_task(_relay_ask(self.ask, self.id, event)))
                if self.phase is Phase.RUNNING:
                    self.phase = Phase.ASKING
            case "mcp.job.result":
                result, error = event.get("result"), event.get("error")
                if isinstance(error, dict) and isinstance(error.get("code"), int):
                    # The handler's protocol-level failure (AMB-285); `result` is what an older
                    # server would show instead.
                    raise ProtocolError(error["code"], str(error.get("message") or ""), error.get("data"))
                if not isinstance(result, dict):
                    return error_result(f"Tool {self.tool.name!r} failed with an internal error.")
                return result
        return None

    async def _end(self, from_status: str, status: str, detail: str, message: str) -> dict[str, Any]:
        """End the run without the worker's result: tell its worker to stop (now, or when it picks the
        job up), record the end on its row, and answer the caller with an isError result."""
        await asyncio.shield(contract.request_cancel(self.id))
        await asyncio.shield(runs.close_run(self.id, (from_status,), status, detail))
        return error_result(message)

    async def _not_started(self) -> dict[str, Any]:
        return await self._end(
            runs.QUEUED,
            ToolRun.Status.NOT_STARTED,
            f"No worker started it within {self.start_seconds:g} s.",
            f"No worker started tool {self.tool.name!r} within {self.start_seconds:g} seconds. "
            "The workers are down or busy; the call did not run. Try again later.",
        )

    async def _lost(self) -> dict[str, Any]:
        silent = settings.MCP_BACKGROUND_LIVENESS_SECONDS
        return await self._end(
            runs.RUNNING,
            ToolRun.Status.LOST,
            f"The worker sent no sign of life for {silent:g} s (it died or hangs); nothing was retried.",
            f"The worker running tool {self.tool.name!r} stopped answering (no sign of life for {silent:g} s); "
            "it may have died. The call was not retried: check its effects before calling again.",
        )

    async def _gave_up(self) -> dict[str, Any]:
        return await self._end(
            runs.RUNNING,
            ToolRun.Status.LOST,
            "The worker stopped answering; the caller gave up.",
            f"The worker running tool {self.tool.name!r} stopped answering.",
        )


async def run(
    ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any], ask: Asker, job_id: str | None = None
) -> dict[str, Any]:
    """Run `tool` on a Celery worker and return its CallToolResult; relay its notifications meanwhile.

    The handler's questions are asked with `ask` (the request's asker, protocol.asking); a 2026-07-28
    question without an answer yet raises InputRequired here, as an inline handler's would.
    `job_id` names a run whose ToolRun row its caller already made (a task, protocol.tasks).
    How a run goes and every way it ends: _Relay.
    """
    # The default prefix: channels_redis reads all of a process's "specific" channels from one Redis
    # list under one lock; a channel of another prefix waited behind that reader (replies never came).
    layer = get_channel_layer()
    assert layer is not None, "CHANNEL_LAYERS is configured (mcpsite/settings.py)"
    channel = await layer.new_channel()
    job = _job(ctx, tool, arguments, channel, job_id)
    return await _Relay(ctx, tool, ask, job, layer).run(row_exists=job_id is not None)


async def follow(
    job: dict[str, Any],
    tenant: TenantInfo,
    tool: ToolDef,
    emit: RelayingEmit,
    cancelled: asyncio.Event,
    relayed_until: str,
) -> dict[str, Any]:
    """Relay on, from this process, a run whose relay was lost with its process (AMB-369): the job as it
    was marked on the call's stream, `relayed_until` its last reply stored there. Returns the worker's
    CallToolResult, or how the run ended without one, as `run` does.

    A question the worker asks from here on cannot reach the client (this process holds no asker of
    the call's): the handler is told so (ToolError), as where no client can be asked.
    """
    ctx = contract.context(job, tenant, emit, cancelled)
    return await _Relay(ctx, tool, ctx.ask, job, layer=None).follow(relayed_until)
