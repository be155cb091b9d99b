"""Streamable HTTP: one endpoint per tenant, /t/<slug>/mcp, serving both eras.

Legacy (2025-03-26 .. 2025-11-25): POST/GET/DELETE with sessions, here. Modern (2026-07-28): each
POST is stateless, decided per request by `envelope.is_modern_request` and served by modern.py/listen.py;
a GET or DELETE naming a modern version gets 405, as that revision's transport page says.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from django.conf import settings

from mcp_app import catalog
from mcp_app.core.context import RequestContext, SessionState
from mcp_app.core.versions import (
    DEFAULT_NEGOTIATED,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
    V2025_06_18,
    V2025_11_25,
)
from mcp_app.infra import notify, redis_client
from mcp_app.protocol import discovery
from mcp_app.protocol.dispatch import LEGACY_METHODS
from mcp_app.protocol.jsonrpc import (
    METHOD_NOT_FOUND,
    InvalidRequest,
    classify,
    error_response,
    is_initialize,
    truncate,
    usable_id,
)
from mcp_app.streams import events, inflight, polling, session_admission, sessions
from mcp_app.transport import auth, browsers, envelope, listen, modern, origin, pump, refusals, runner, sse
from mcp_app.transport.base import McpConsumer
from mcp_app.transport.exchange import Exchange
from mcp_app.transport.session_streams import SessionStreams
from mcp_app.transport.wire import HttpError, accepts, media_types, parse_json_body
from mcp_app.usage import recorder as usage

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
SESSION_HEADER_OUT = b"mcp-session-id"


class StreamableHttpConsumer(SessionStreams, McpConsumer):
    """POST sends messages, GET opens the session's standalone stream, DELETE ends the session."""

    allowed_methods = ("GET", "POST", "DELETE", "OPTIONS")

    async def handle_request(self) -> None:
        handler = {
            "POST": self.handle_post,
            "GET": self.handle_get,
            "DELETE": self.handle_delete,
            "OPTIONS": self.handle_options,
        }.get(self.request.method)
        self.prefetched: tuple[str, SessionState | None] | None = None
        modern_header = (self.request.header(VERSION_HEADER) or "").strip() in MODERN_VERSIONS
        if handler is not None and self.request.method != "OPTIONS" and not modern_header:
            await self.prefetch()  # a modern request reads no session
        self.tenant = await self.resolve_tenant()
        if browsers.is_browser_visit(self.request):
            # The MCP URL opened in a browser: the page that says how to connect (AMB-230).
            status, headers = browsers.connect_page_redirect(self.tenant.slug)
            await self.send_empty(status, headers)
            return
        if handler is None:
            raise self.method_not_allowed()
        if modern_header and self.request.method in ("GET", "DELETE"):
            raise HttpError(
                405,
                f"{self.request.method} is not part of MCP 2026-07-28: send each request as a POST, "
                "and subscriptions/listen for change notifications.",
                code=None,
                headers=[(b"allow", b"POST, OPTIONS")],
            )
        await handler()

    # --- shared checks --------------------------------------------------------------------------

    async def prefetch(self) -> None:
        """Read the tenant's change token and the session in one Redis round trip.

        Only for a tenant this process has cached (its id is known without I/O) and a request that
        names a session: the two reads a warm request needs. resolve_tenant, get_catalog and
        load_session then find them in memory. A failure here only costs the separate reads.
        """
        if not redis_client.enabled():
            return
        tenant_id = catalog.cached_tenant_id(self.route_kwargs["slug"])
        session_id = (self.request.header(SESSION_HEADER) or "").strip()
        if tenant_id is None or not sessions.valid_session_id(session_id) or sessions.is_legacy(session_id):
            return
        origin.check_host(self.request)  # nothing touches Redis for a request with a foreign Host
        store = sessions.get_store()
        assert isinstance(store, sessions.RedisSessionStore)
        try:
            if catalog.pushed(tenant_id):
                # The token comes by push: the session alone, one GETEX (a pipeline costs ~1.6x the CPU).
                session = await store.get(session_id)
            else:
                mark = catalog.subscription_mark()
                session, (token,) = await store.get_with(session_id, [catalog.version_key(tenant_id)])
                catalog.remember_token(tenant_id, token, mark)
        except redis_client.UNAVAILABLE as error:  # an outage: the request's own lookup answers it clearly
            logger.warning("could not prefetch session and tenant token: %s", error)
            return
        except Exception:
            logger.warning("could not prefetch session and tenant token", exc_info=True)
            return
        self.prefetched = (session_id, session)

    async def load_session(self, required: bool = True, request_id: Any = None) -> SessionState | None:
        """Return the request's session: 400 without the header (HT-38), 404 unknown/ended/foreign (HT-39)."""
        session_id = self.request.header(SESSION_HEADER)
        if session_id is None:
            if required:
                raise HttpError(
                    400,
                    "Missing Mcp-Session-Id header; send initialize first to start a session.",
                    request_id=request_id,
                )
            return None
        session_id = session_id.strip()
        not_found = HttpError(
            404, "Session not found or ended; start a new session with initialize.", request_id=request_id
        )
        if not sessions.valid_session_id(session_id) or sessions.is_legacy(session_id):
            raise not_found
        prefetched, self.prefetched = self.prefetched, None
        if prefetched is not None and prefetched[0] == session_id:
            session = prefetched[1]
        else:
            session = await sessions.get_store().get(session_id)
        # Another tenant's (or another user's or OAuth client's) session gets the same answer as a missing one.
        if session is None or session.tenant_id != self.tenant.id or not auth.owns(session, self.caller):
            raise not_found
        return session

    def refuse_unknown_method(self, message: Any, request_id: Any) -> None:
        """A sessionless request, without the 2026-07-28 envelope, for a method initialize does not open.

        Typically `server/discover` sent bare: say how each era is reached instead of "missing
        session". The 400's body is no 2026-07-28 error, as befits a request of neither era.
        """
        method = message.get("method") if isinstance(message, dict) else None
        if not isinstance(method, str) or "id" not in message or method in LEGACY_METHODS:
            return
        raise HttpError(
            400,
            truncate(
                f"Method {method!r} needs the MCP 2026-07-28 envelope (params._meta with "
                f"{META_PROTOCOL_VERSION!r}) or a session: revisions {', '.join(SUPPORTED_VERSIONS)} "
                "start with initialize.",
                300,
            ),
            code=METHOD_NOT_FOUND,
            request_id=request_id,
        )

    def check_version_header(self, session: SessionState | None, request_id: Any = None) -> str:
        """Return the version in force (the session's, else the header's): 400 when the header is unsupported (HT-47)."""
        header = self.request.header(VERSION_HEADER)
        if header is not None:
            header = header.strip()
            if header not in SUPPORTED_VERSIONS:
                raise HttpError(
                    400,
                    f"Unsupported MCP-Protocol-Version {header!r}; supported: {', '.join(SUPPORTED_VERSIONS)}.",
                    request_id=request_id,
                )
            # A supported version other than the negotiated one is served, not refused: real clients
            # (the official conformance harness among them) send their own newest version on every
            # request. The session's negotiated version still decides the answers' shapes, since
            # everything the session does (capabilities, batches, notifications) was agreed under it.
        if session is not None:
            return session.protocol_version
        return header or DEFAULT_NEGOTIATED  # HT-46

    # --- OPTIONS --------------------------------------------------------------------------------

    async def handle_options(self) -> None:
        """Answer a CORS preflight (AMB-10); the origin was checked in resolve_tenant."""
        self.extra_headers = []
        await self.send_empty(204, origin.preflight_headers(self.request.header("origin")))

    # --- POST -----------------------------------------------------------------------------------

    async def handle_post(self) -> None:
        accept = self.request.header("accept")
        if not (accepts(accept, "application/json") and accepts(accept, "text/event-stream")):
            raise HttpError(406, "Accept must list both application/json and text/event-stream.")
        if "application/json" not in media_types(self.request.header("content-type")):
            raise HttpError(415, "Content-Type must be application/json.")
        self.caller = await auth.authenticate(self.request, self.tenant)
        body = parse_json_body(await self.read_body(self.tenant), settings.MCP_MAX_JSON_DEPTH)
        if envelope.is_modern_request(body, self.request):
            await self.handle_modern_post(body)
            return

        batch = isinstance(body, list)
        if batch:
            if not body:
                raise HttpError(400, "Invalid request: an empty batch.")
            messages = body
        elif isinstance(body, dict):
            messages = [body]
        else:
            raise HttpError(400, "Invalid request: the body must be a JSON-RPC message object (or a batch).")
        first_id = None if batch else usable_id(body)

        initialize = not batch and is_initialize(body)
        if batch and any(is_initialize(m) for m in messages):
            raise HttpError(400, "Invalid request: initialize must not be part of a batch.")  # LC-11

        if not batch and not initialize and self.request.header(SESSION_HEADER) is None:
            self.refuse_unknown_method(body, first_id)
        session = await self.load_session(required=not initialize, request_id=first_id)
        if initialize:
            # The header is for requests after initialize (HT-48); the body negotiates the version.
            version = session.protocol_version if session else DEFAULT_NEGOTIATED
        else:
            version = self.check_version_header(session, first_id)
        if batch and version >= V2025_06_18:
            raise HttpError(400, f"Invalid request: batches are not supported in protocol version {version}.")
        auth.check_scopes(self.caller, self.tenant, messages)

        session_id = session.id if session else sessions.new_session_id()
        self._pending_owner = ""
        if initialize and session is None:  # counted before it is made, refused with 429 past a cap
            self._pending_owner = session_admission.client_key(self.caller, self.client_address())
            await refusals.admit_or_refuse(self.tenant, session_id, self._pending_owner, first_id)
        self._pending_session_id = session_id
        self._snapshot = runner.snapshot(session)
        exchange = Exchange(session_id, runner.run_dispatch, self.after_request, self.tenant)
        requests = 0
        for message in messages:
            try:
                kind = classify(message)
            except InvalidRequest as exc:
                if not batch:
                    raise HttpError(400, f"Invalid request: {exc.message}", request_id=first_id) from None
                exchange.held.append(error_response(usable_id(message), exc))
                continue
            ctx = runner.build_context(
                self.tenant,
                self.caller,
                session,
                version,
                message,
                client_address=self.client_address(),
                discovery=discovery.choice_of(self.request.query),
            )
            if kind == "request":
                requests += 1
                exchange.start(ctx, message, cancellable=not initialize)
            else:
                await runner.accept_message(ctx, message, kind, session)

        if requests == 0 and not exchange.held:
            await self.send_empty(202)  # HT-12, HT-61
            return
        if requests == 0:
            await self.send_json(json.dumps(exchange.held).encode())
            return
        headers = [(SESSION_HEADER_OUT, session_id.encode())] if initialize else []
        await self.respond(exchange, batch, headers, version)

    async def handle_modern_post(self, body: Any) -> None:
        """One stateless 2026-07-28 message: checked, authorized, then answered on this POST."""
        checked = envelope.read(body, self.request)
        if checked.request_id is None:
            await self.send_empty(202)  # this revision defines no client notification over HTTP
            return
        await modern.authorize(self, checked, body)
        if checked.method == envelope.LISTEN:
            async with refusals.held(self.tenant, None, checked.request_id):
                usage.recorder().listener_opened(self.tenant.id)  # counted in memory (mcp_app.usage.live)
                try:
                    await listen.serve(self, checked)
                finally:
                    usage.recorder().listener_closed(self.tenant.id)
            return
        context = modern.context(self.tenant, self.caller, checked, body, self.client_address(), self.request)
        await modern.serve(self, context, body)

    async def after_request(
        self, ctx: RequestContext, message: dict[str, Any], response: dict[str, Any]
    ) -> None:
        """Create the session after a successful initialize; persist state a request changed."""
        if is_initialize(message):
            if ctx.session is None and isinstance(response.get("result"), dict):
                await self.create_session(ctx, message, response["result"])
            return
        session = ctx.session
        if session is not None and runner.session_changed(self._snapshot, session):
            await runner.persist_session(session, self._snapshot)

    async def create_session(
        self, ctx: RequestContext, message: dict[str, Any], result: dict[str, Any]
    ) -> None:
        params = message.get("params") or {}
        state = SessionState(
            id=self._pending_session_id,
            tenant_id=self.tenant.id,
            protocol_version=result.get("protocolVersion", DEFAULT_NEGOTIATED),
            client_info=params.get("clientInfo") or {},
            client_capabilities=params.get("capabilities") or {},
            user_id=ctx.user_id,
            client_id=ctx.client_id,
            created_at=time.time(),
            owner=self._pending_owner,
        )
        await sessions.get_store().save(state)

    async def respond(self, exchange: Exchange, batch: bool, headers: list, version: str) -> None:
        """Send the exchange's output: one JSON answer, or an SSE stream from the first emitted message."""
        queue = exchange.queue
        assert queue is not None
        try:
            item = await queue.get()
            if item[0] == "json":
                responses = item[1]
                if responses:
                    payload = responses if batch else responses[0]
                    if not batch and "error" in payload:
                        # A failed initialize made no session: naming one would send the client to it.
                        headers = [h for h in headers if h[0] != SESSION_HEADER_OUT]
                    await self.send_json(json.dumps(payload).encode(), headers)
                else:
                    await self.start_sse(headers)  # every request was cancelled: no response (UT-10)
                    await self.end_body()
                return
            await self.start_sse(headers)
            stream_id = exchange.stream_id
            poll_at = polling.deadline(self.tenant, version) if stream_id is not None else None
            if version >= V2025_11_25 and stream_id is not None:
                await self.send_chunk(
                    sse.priming_event(events.event_id(stream_id, 0), polling.retry_ms(self.tenant, version))
                )
            last_sent = events.event_id(stream_id, 0) if stream_id is not None else None

            async def deliver(item: tuple) -> bool:
                nonlocal last_sent
                if item[0] == "end":
                    return False
                await self.send_chunk(sse.message_event(item[2], item[1]))
                last_sent = item[1] or last_sent
                return True

            async def close_for_polling() -> None:
                # Polling (AMB-128): the call runs on; the client resumes after `retry`.
                assert stream_id is not None
                await self.send_chunk(sse.retry_field(polling.retry_ms(self.tenant, version)))
                polling.closed(stream_id, last_sent)

            if await deliver(item):
                await pump.pump(
                    self,
                    pump.from_queue(queue),
                    deliver,
                    deadline=poll_at,
                    on_deadline=close_for_polling,
                    ready=lambda: not queue.empty(),  # what came before the deadline goes out first
                )
            await self.end_body()
        finally:
            await exchange.detach()

    # --- DELETE ---------------------------------------------------------------------------------

    async def handle_delete(self) -> None:
        """End the session (AMB-8: 204; open streams close, its running requests are cancelled)."""
        self.caller = await auth.authenticate(self.request, self.tenant)
        session = await self.load_session()
        assert session is not None
        self.check_version_header(session)
        if not await sessions.get_store().delete(session.id, session):
            raise HttpError(404, "Session not found or ended.")
        inflight.cancel_session(session.id)
        await notify.apublish_session(session.id, {"type": "mcp.session_closed", "session_id": session.id})
        await self.send_empty(204)
