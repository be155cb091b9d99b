"""One POST's requests in flight: each dispatch runs in its own task and its output is routed here.

JSON or SSE (AMB-2): while no request has emitted anything, results are held and the POST is
answered with `application/json`. The first notification a request emits before the exchange
is complete switches it to an SSE stream: from then on every message (held results first) is
written to the event store, then handed to the connected consumer if there still is one.
The tasks outlive the HTTP connection (HT-19), so late events still reach the store for a
`Last-Event-ID` resume.

The switch takes one of the tenant's stream slots (stream_slots.py) while the client is connected;
past a cap the exchange goes "quiet" instead (AMB-87): no SSE, its notifications dropped (progress
and log messages are advisory), a question to the client refused to the handler in words, and the
responses answered as JSON as if nothing had been emitted. The request's work is never refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.protocol.jsonrpc import InternalError, MessageKind, error_response
from mcp_app.streams import events, inflight, stream_slots

logger = logging.getLogger(__name__)

Message = dict[str, Any]
Dispatch = Callable[[RequestContext, Message, MessageKind], Awaitable[Message | None]]
AfterHook = Callable[[RequestContext, Message, Message], Awaitable[None]]

# Tasks are referenced here until done: the loop only holds them weakly.
_tasks: set[asyncio.Task] = set()


class Exchange:
    """Routes the output of one POST's requests to the JSON answer or the SSE stream."""

    def __init__(
        self, session_id: str, dispatch: Dispatch, after: AfterHook, tenant: TenantInfo | None = None
    ) -> None:
        self.session_id = session_id
        self.dispatch = dispatch
        self.after = after
        self.tenant = tenant  # whose stream caps apply (None: none)
        self.slot: stream_slots.Slot | None = None
        self.mode = "pending"  # → "json" | "sse", or "quiet" (past a stream cap) → "json"
        self.stream_id: str | None = None
        self.outstanding = 0
        self.request_ids: list[Any] = []  # named in the stream, for a resume after this process died
        self.held: list[Message] = []
        self.lock = asyncio.Lock()
        # What the connected consumer reads: ("json", [responses]) | ("event", id, message) | ("end",)
        self.queue: asyncio.Queue | None = asyncio.Queue()

    def start(self, ctx: RequestContext, message: Message, cancellable: bool) -> None:
        """Run one request in its own task."""
        self.outstanding += 1
        self.request_ids.append(message["id"])
        cancelled = asyncio.Event()
        ctx = ctx.but(emit=_RequestEmit(self, cancelled), cancelled=cancelled)
        task = asyncio.get_running_loop().create_task(self._run(ctx, message, cancellable))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
        if cancellable:
            inflight.register(self.session_id, message["id"], task, cancelled)

    async def detach(self) -> None:
        """The client went away: keep running, keep storing, stop queueing; free its stream slot."""
        self.queue = None
        slot, self.slot = self.slot, None
        await stream_slots.release(slot)

    async def _may_stream(self) -> bool:
        """Take a stream slot for the connected client; False past a cap."""
        if self.queue is None or self.tenant is None:
            return True  # nobody is connected: the events are stored for a resume only
        try:
            slot = await stream_slots.acquire(self.tenant, self.session_id)
        except stream_slots.StreamCapReached:
            return False
        if self.queue is None:
            await stream_slots.release(slot)  # the client left while the slot was taken
        else:
            self.slot = slot
        return True

    async def _run(self, ctx: RequestContext, message: Message, cancellable: bool) -> None:
        response: Message | None
        task = asyncio.current_task()
        try:
            response = await self.dispatch(ctx, message, "request")  # classified by the transport
            if response is not None and not ctx.cancelled.is_set():
                await self.after(ctx, message, response)
        except asyncio.CancelledError:
            response = None
        except redis_client.UNAVAILABLE:
            logger.warning("request %s failed: Redis is not answering", message.get("method"), exc_info=True)
            response = error_response(message.get("id"), InternalError(redis_client.UNAVAILABLE_MESSAGE))
        except Exception:
            logger.exception("request %s failed in the transport", message.get("method"))
            response = error_response(message.get("id"), InternalError())
        finally:
            if cancellable and task is not None:
                inflight.unregister(self.session_id, message["id"], task)
        if ctx.cancelled.is_set():
            response = None  # a cancelled request gets no response (UT-10)
        await self._finish(response)

    async def _emit(
        self, notification: Message, cancelled: asyncio.Event, marks: dict[str, str] | None = None
    ) -> None:
        if cancelled.is_set():
            return
        async with self.lock:
            if self.mode == "pending" and not await self._may_stream():
                self.mode = "quiet"
            if self.mode == "quiet" and "id" in notification:
                raise ToolError(
                    "This needs to ask the client, and the answer cannot stream: this server's "
                    "limit of open streams is reached. Retry when a stream has closed."
                )
            if self.mode in ("json", "quiet"):
                return  # everything was answered, nothing may follow the response (UT-23); or quiet
            if self.mode == "pending":
                self.mode = "sse"
                self.stream_id = events.new_stream_id()
                events.owner_beat.started()
                held, self.held = self.held, []
                for response in held:
                    await self._publish(response, final=False)
            await self._publish(notification, final=False, marks=marks)

    async def _finish(self, response: Message | None) -> None:
        async with self.lock:
            self.outstanding -= 1
            last = self.outstanding == 0
            if self.mode == "sse":
                try:
                    if response is not None:
                        await self._publish(response, final=last)
                    elif last and self.stream_id is not None:
                        await events.get_store().mark_done(self.stream_id)
                finally:
                    if last:
                        events.owner_beat.ended()
                        self._put(("end",))
                return
            if response is not None:
                self.held.append(response)
            if last:
                self.mode = "json"
                self._put(("json", self.held))

    async def _publish(self, message: Message, final: bool, marks: dict[str, str] | None = None) -> None:
        assert self.stream_id is not None
        try:
            seq = await events.get_store().append(
                self.stream_id,
                self.session_id,
                "post",
                message,
                final=final,
                request_ids=self.request_ids,
                marks=marks,
            )
        except Exception:
            # A store outage must not lose the live message; only resumption suffers.
            logger.exception("could not store an SSE event")
            seq = 0
        self._put(("event", events.event_id(self.stream_id, seq) if seq else None, message))

    def _put(self, item: tuple) -> None:
        if self.queue is not None:
            self.queue.put_nowait(item)


class _RequestEmit:
    """One request's emit (a RelayingEmit): its notifications go to the exchange's stream, a background
    relay's with the marks a takeover needs (AMB-369), stored in the same write as the event."""

    def __init__(self, exchange: Exchange, cancelled: asyncio.Event) -> None:
        self.exchange, self.cancelled = exchange, cancelled

    async def __call__(self, message: Message) -> None:
        await self.exchange._emit(message, self.cancelled)

    async def relayed(self, message: Message, marks: dict[str, str]) -> None:
        await self.exchange._emit(message, self.cancelled, marks)
