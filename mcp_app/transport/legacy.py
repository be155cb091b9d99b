"""The 2024-11-05 HTTP+SSE transport (HT-50..55), kept for old clients beside the MCP endpoint.

GET /t/<slug>/sse opens the stream, creates the session and names the POST endpoint in its first
`endpoint` event; POST /t/<slug>/messages?session_id=<id> takes messages and answers 202. Every
server message, responses included, goes out on the stream as `event: message`. The POST side
publishes them to the session's channel-layer group, so a POST served by another process still
reaches the process that holds the stream. The session lives as long as the stream (AMB-13).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

from mcp_app.core.context import RequestContext, SessionState
from mcp_app.core.versions import V2024_11_05
from mcp_app.infra import notify
from mcp_app.protocol import discovery
from mcp_app.protocol.jsonrpc import (
    InternalError,
    InvalidRequest,
    classify,
    error_response,
    is_initialize,
)
from mcp_app.streams import inflight, session_admission, sessions, stream_slots
from mcp_app.transport import auth, origin, refusals, runner, sse
from mcp_app.transport.base import McpConsumer
from mcp_app.transport.stream_view import StreamView
from mcp_app.transport.wire import HttpError, accepts, media_types, parse_json_body

logger = logging.getLogger(__name__)

_tasks: set[asyncio.Task] = set()


class LegacySseConsumer(McpConsumer):
    """GET /t/<slug>/sse: the server→client half of the old transport."""

    allowed_methods = ("GET",)

    async def handle_request(self) -> None:
        tenant = await self.resolve_tenant()
        if self.request.method != "GET":
            raise self.method_not_allowed()
        accept = self.request.header("accept")
        if accept is not None and not accepts(accept, "text/event-stream"):
            raise HttpError(406, "Accept must list text/event-stream.", code=None)
        caller = await auth.authenticate(self.request, tenant)
        session = SessionState(
            id=sessions.new_session_id(legacy=True),
            tenant_id=tenant.id,
            protocol_version=V2024_11_05,
            user_id=caller.user_id,
            client_id=caller.client_id,
            created_at=time.time(),
            owner=session_admission.client_key(caller, self.client_address()),
        )
        await refusals.admit_or_refuse(tenant, session.id, session.owner, json_rpc=False)
        slot = await refusals.acquire_or_refuse(tenant, session.id, json_rpc=False)
        store = sessions.get_store()
        self.session_id = session.id
        self.view = StreamView(session)
        try:
            await store.save(session, fresh=False)  # held by its stream, and ended with it (AMB-104)

            async def prelude() -> None:
                await self.start_sse()
                endpoint = f"/t/{tenant.slug}/messages?session_id={session.id}"
                await self.send_chunk(sse.event(endpoint, name="endpoint"))

            await self.run_stream(
                [notify.tenant_group(tenant.id), notify.session_group(session.id)],
                self.on_stream_event,
                lambda: store.get(session.id),  # an open stream keeps its session alive
                prelude=prelude,
            )
            await self.end_body()
        finally:
            await stream_slots.release(slot)
            await store.delete(session.id, session)
            inflight.cancel_session(session.id)

    async def on_stream_event(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "mcp.session_closed":
            return False
        if kind == "mcp.cancel":
            inflight.cancel_local(self.session_id, event.get("request_id"), event.get("reason"))
        elif kind == "mcp.session_message" and isinstance(event.get("message"), dict):
            await self.send_chunk(sse.message_event(event["message"], None))
        else:
            message = await self.view.notification_for(event)
            if message is False:
                return False
            if isinstance(message, dict):
                await self.send_chunk(sse.message_event(message, None))
        return True


class LegacyMessagesConsumer(McpConsumer):
    """POST /t/<slug>/messages?session_id=<id>: the client→server half of the old transport."""

    allowed_methods = ("POST", "OPTIONS")

    async def handle_request(self) -> None:
        self.tenant = await self.resolve_tenant()
        if self.request.method == "OPTIONS":
            self.extra_headers = []
            await self.send_empty(204, origin.preflight_headers(self.request.header("origin")))
            return
        if self.request.method != "POST":
            raise self.method_not_allowed()
        if "application/json" not in media_types(self.request.header("content-type")):
            raise HttpError(415, "Content-Type must be application/json.")
        self.caller = await auth.authenticate(self.request, self.tenant)
        session_id = (parse_qs(self.request.query).get("session_id") or [""])[0]
        if not session_id:
            raise HttpError(400, "Missing session_id query parameter; open the SSE stream first.")
        not_found = HttpError(404, "Session not found or ended; open a new SSE stream.")
        if not sessions.valid_session_id(session_id) or not sessions.is_legacy(session_id):
            raise not_found
        session = await sessions.get_store().get(session_id)
        if session is None or session.tenant_id != self.tenant.id or not auth.owns(session, self.caller):
            raise not_found

        body = parse_json_body(await self.read_body(self.tenant), settings.MCP_MAX_JSON_DEPTH)
        # 2024-11-05 does not forbid JSON-RPC batches; accept them (AMB-12), answers go out one by one.
        messages = body if isinstance(body, list) else [body]
        if not messages:
            raise HttpError(400, "Invalid request: an empty batch.")
        if isinstance(body, list) and any(is_initialize(m) for m in messages):
            raise HttpError(400, "Invalid request: initialize must not be part of a batch.")
        auth.check_scopes(self.caller, self.tenant, messages)
        for message in messages:
            try:
                kind = classify(message)
            except InvalidRequest as exc:
                if not isinstance(body, list):
                    raise HttpError(400, f"Invalid request: {exc.message}") from None
                await self.publish(session.id, error_response(None, exc))
                continue
            if kind == "request":
                self.start(session, message)
            else:
                await runner.accept_message(self.context(session, message, None), message, kind, session)
        await self.send_response(
            202, b"Accepted\n", headers=[(b"content-type", b"text/plain"), *self.extra_headers]
        )

    def context(
        self, session: SessionState, message: dict[str, Any], cancelled: asyncio.Event | None
    ) -> RequestContext:
        session_id = session.id
        # The legacy session exists before initialize; the core creates nothing, it only must not see
        # a session on the first initialize (a second one, after clientInfo is known, is refused).
        visible = None if is_initialize(message) and not session.client_info else session

        async def emit(note: dict[str, Any]) -> None:
            if cancelled is None or not cancelled.is_set():
                await self.publish(session_id, note)

        return runner.build_context(
            self.tenant,
            self.caller,
            visible,
            session.protocol_version,
            message,
            client_capabilities=session.client_capabilities,
            emit=emit,
            cancelled=cancelled,
            # Who the caller is for a quota survives a new session (AMB-352): an anonymous one, by address.
            client_address=self.client_address(),
            discovery=discovery.choice_of(self.request.query),
        )

    async def publish(self, session_id: str, message: dict[str, Any]) -> None:
        await notify.apublish_session(session_id, {"type": "mcp.session_message", "message": message})

    def start(self, session: SessionState, message: dict[str, Any]) -> None:
        cancelled = asyncio.Event()
        ctx = self.context(session, message, cancelled)
        task = asyncio.get_running_loop().create_task(self.run(ctx, session, message))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
        if not is_initialize(message):
            inflight.register(session.id, message["id"], task, cancelled)

    async def run(self, ctx: RequestContext, session: SessionState, message: dict[str, Any]) -> None:
        before = runner.snapshot(session)
        response: dict[str, Any] | None
        try:
            response = await runner.run_dispatch(ctx, message, "request")
            if response is not None and is_initialize(message) and isinstance(response.get("result"), dict):
                params = message.get("params") or {}
                session.protocol_version = response["result"].get("protocolVersion", V2024_11_05)
                session.client_info = params.get("clientInfo") or {}
                session.client_capabilities = params.get("capabilities") or {}
            if runner.session_changed(before, session):
                await runner.persist_session(session, before)
        except asyncio.CancelledError:
            response = None
        except Exception:
            logger.exception("legacy request %s failed", message.get("method"))
            response = error_response(message.get("id"), InternalError())
        finally:
            task = asyncio.current_task()
            if task is not None:
                inflight.unregister(session.id, message["id"], task)
        if response is not None and not ctx.cancelled.is_set():
            await self.publish(session.id, response)
