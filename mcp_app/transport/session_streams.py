"""The legacy era's session streams: the standalone GET stream and the resumption of a POST's stream.

A mixin of the Streamable HTTP consumer (consumer.py), which provides the session checks it uses
(`load_session`, `check_version_header`). One GET stream per session receives the tenant's list
changes, the session's resource updates and messages addressed to the session; a `Last-Event-ID`
resumes either kind of stream from the event store (HT-34, AMB-4). 2026-07-28 has neither.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings

from mcp_app.core.context import SessionState
from mcp_app.core.versions import V2025_11_25
from mcp_app.infra import notify
from mcp_app.streams import events, inflight, polling, standalone, takeover
from mcp_app.transport import auth, pump, refusals, sse
from mcp_app.transport.base import McpConsumer
from mcp_app.transport.stream_view import StreamView
from mcp_app.transport.wire import HttpError, accepts

logger = logging.getLogger(__name__)


class SessionStreams(McpConsumer):
    """GET (the session's standalone stream) and the replay of a POST's stream."""

    # The streamable HTTP consumer's (consumer.py), which this class is a part of.
    async def load_session(self, required: bool = True, request_id: Any = None) -> SessionState | None:
        raise NotImplementedError

    def check_version_header(self, session: SessionState | None, request_id: Any = None) -> str:
        raise NotImplementedError

    # --- GET ------------------------------------------------------------------------------------

    async def handle_get(self) -> None:
        if not accepts(self.request.header("accept"), "text/event-stream"):
            raise HttpError(406, "Accept must list text/event-stream.")
        self.caller = await auth.authenticate(self.request, self.tenant)
        session = await self.load_session()
        assert session is not None
        version = self.check_version_header(session)
        async with refusals.held(self.tenant, session.id):
            await self.open_get_stream(session, version)

    async def open_get_stream(self, session: SessionState, version: str) -> None:
        """Resume the stream a Last-Event-ID names, or open the session's standalone stream."""
        store = events.get_store()

        resume_from: tuple[str, int] | None = None
        last_event_id = self.request.header("last-event-id")
        if last_event_id:
            parsed = events.parse_event_id(last_event_id)
            info = await store.info(parsed[0]) if parsed else None
            if parsed is not None and info is not None and info.session_id == session.id:
                if info.kind == "post":
                    await self.resume_post_stream(parsed[0], parsed[1], version)
                    return
                resume_from = parsed
            # An unknown, expired or foreign id opens a fresh standalone stream (AMB-4).

        stream_id = resume_from[0] if resume_from else events.new_stream_id()
        holder = standalone.new_holder(stream_id)
        claimed = await standalone.acquire(session.id, holder, resuming=resume_from is not None)
        if claimed == standalone.REFUSED:
            raise HttpError(
                409, "This session already has an open GET stream; only one is allowed.", code=None
            )
        try:
            if claimed == standalone.TAKEN_OVER:
                # The connection this client left (on whichever process) ends: one writer per stream.
                await notify.apublish_session(session.id, {"type": "mcp.stream_superseded", "holder": holder})
            await store.open(stream_id, session.id, "get")
            self.session_id = session.id
            self.holder = holder
            self.stream_id = stream_id
            self.view = StreamView(session)

            async def prelude() -> None:
                # Groups are joined: a change made since load_session is seen now or announced later.
                await self.view.refresh()
                await self.start_sse()
                if version >= V2025_11_25:
                    await self.send_chunk(
                        sse.priming_event(events.event_id(stream_id, 0), settings.MCP_SSE_RETRY_MS)
                    )
                if resume_from:
                    for seq, message in await store.read_after(stream_id, resume_from[1]):
                        await self.send_chunk(sse.message_event(message, events.event_id(stream_id, seq)))

            await self.run_stream(
                [notify.tenant_group(self.tenant.id), notify.session_group(session.id)],
                self.on_stream_event,
                lambda: standalone.refresh(session.id),
                prelude=prelude,
            )
            await self.end_body()
        finally:
            try:
                await standalone.release(session.id, holder)
            except Exception:  # the slot's TTL frees it soon; the client must not see an error
                logger.warning(
                    "could not release the GET stream slot of session %.8s", session.id, exc_info=True
                )

    async def resume_post_stream(self, stream_id: str, after: int, version: str) -> None:
        """Replay a request's stream after `after`, then wait (bounded) for the rest of it (HT-34)."""
        store = events.get_store()
        await self.start_sse()
        if version >= V2025_11_25:
            await self.send_chunk(sse.retry_field(polling.retry_ms(self.tenant, version)))
        polls = polling.applies(self.tenant, version)
        wait_seconds = settings.MCP_SSE_RESUME_WAIT_SECONDS
        if polls:  # this connection too is closed after the tenant's seconds, and resumed again (AMB-128)
            wait_seconds = min(wait_seconds, self.tenant.stream_poll_seconds)
        cursor = after

        async def next_events(timeout: float) -> tuple[list[tuple[int, Any]], bool] | pump.Signal:
            """The events after `cursor` and whether the stream is over, or IDLE after `timeout`."""
            until = time.monotonic() + timeout
            while True:
                # The stream's state before its events: a last response stored meanwhile is read now,
                # not left for one more resume (its `done` is set with it).
                info = await store.info(stream_id)
                stored = await store.read_after(stream_id, cursor)
                if stored or info is None or info.done:
                    return stored, info is None or info.done
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return pump.Signal.IDLE
                if await takeover.take_over(info, stream_id):
                    # Its process died: a background job's relay goes on here (AMB-369), the rest of its
                    # requests are answered lost (AMB-88); read on.
                    continue
                # Waits no longer than a dead owner's sign of life lasts, so a lost stream ends soon.
                await store.wait(stream_id, cursor, min(remaining, events.OWNER_TTL_SECONDS))

        async def deliver(batch: tuple[list[tuple[int, Any]], bool]) -> bool:
            nonlocal cursor
            for seq, message in batch[0]:
                await self.send_chunk(sse.message_event(message, events.event_id(stream_id, seq)))
                cursor = seq
            return not batch[1]

        async def close_for_polling() -> None:
            await self.send_chunk(sse.retry_field(polling.retry_ms(self.tenant, version)))
            polling.closed(stream_id, events.event_id(stream_id, cursor))

        await pump.pump(
            self,
            next_events,
            deliver,
            deadline=time.monotonic() + wait_seconds,
            on_deadline=close_for_polling if polls else None,
        )
        await self.end_body()

    async def on_stream_event(self, event: dict[str, Any]) -> bool:
        """Forward one channel-layer event to the standalone stream; False closes it."""
        kind = event.get("type")
        if kind == "mcp.session_closed":
            return False
        if kind == "mcp.stream_superseded":
            return event.get("holder") == self.holder  # its client reconnected elsewhere: this one ends
        if kind == "mcp.cancel":
            inflight.cancel_local(self.session_id, event.get("request_id"), event.get("reason"))
            return True
        if kind == "mcp.session_message":
            message = event.get("message")
            if isinstance(message, dict):
                await self.send_stream_message(message)
            return True
        message = await self.view.notification_for(event)
        if message is False:
            return False
        if isinstance(message, dict):
            await self.send_stream_message(message)
        return True

    async def send_stream_message(self, message: dict[str, Any]) -> None:
        """Store, then send, one message on the standalone stream."""
        try:
            seq = await events.get_store().append(self.stream_id, self.session_id, "get", message)
            event_id: str | None = events.event_id(self.stream_id, seq)
        except Exception:
            logger.exception("could not store an SSE event")
            event_id = None
        await self.send_chunk(sse.message_event(message, event_id))
