"""What every MCP HTTP consumer shares: the error funnel, tenant lookup, body reading, SSE streams."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.generic.http import AsyncHttpConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_app import catalog
from mcp_app.core.context import Caller
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.protocol import quotas
from mcp_app.streams import drain
from mcp_app.transport import browsers, origin, pump, sse
from mcp_app.transport.wire import JSON_CONTENT, Headers, HttpError, Request
from tenants import wall

logger = logging.getLogger(__name__)


class ClientGone(Exception):
    """The client closed the connection before the request body arrived."""


class McpConsumer(AsyncHttpConsumer):
    """Base of the MCP endpoints.

    Channels' generic `__call__` opens a channel-layer channel and closes old database connections
    (a thread hop) for every message; a POST needs neither, so this class runs the request itself
    and only GET streams touch the channel layer.
    """

    allowed_methods: tuple[str, ...] = ()
    # Set by handle_request before anything reads them: the URL's tenant, then the authenticated caller.
    tenant: TenantInfo
    caller: Caller

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scope = scope
        self.base_send = send
        # The URL's captured parts (channels' URLRouter puts them in the scope).
        self.route_kwargs: dict[str, Any] = scope.get("url_route", {}).get("kwargs", {})
        self.receive = receive
        self.started = False  # response headers sent
        self.finished = False  # last body chunk sent
        self.extra_headers: Headers = []  # CORS headers, once the origin is known
        self.request = Request.from_scope(scope)
        catalog.begin_request()
        # A POST is an exchange a drain waits for until its response is written, not merely until its
        # handler returned: a response still being sent when the drain let Daphne cancel the
        # application was lost ("SSE stream ended without a response"). A listen stream is a POST too
        # and ends at once on a drain with its last words; GET streams end on the drain themselves.
        counted = False
        try:
            if drain.draining():
                # A connection opened before the drain: its client retries on another process.
                raise HttpError(
                    503,
                    "This server process is shutting down; retry (another process will answer).",
                    code=None,
                    headers=[(b"retry-after", b"1"), (b"connection", b"close")],
                )
            counted = self.request.method == "POST"
            if counted:
                drain.request_began()
            await self.handle_request()
        except HttpError as exc:
            await self.send_error(exc)
        except ClientGone:
            pass
        except redis_client.UNAVAILABLE:
            logger.warning(
                "MCP endpoint: Redis is not answering (%s %s)", self.request.method, self.request.path
            )
            retry = [(b"retry-after", str(redis_client.RETRY_SECONDS).encode())]
            await self.send_error(HttpError(503, redis_client.UNAVAILABLE_MESSAGE, code=None, headers=retry))
        except Exception:
            logger.exception("MCP endpoint failed on %s %s", self.request.method, self.request.path)
            # Internals never reach the wire; 503 says "try again" without a stack trace.
            await self.send_error(
                HttpError(503, "The MCP server could not handle this request; try again.", code=None)
            )
        finally:
            if counted:
                drain.request_ended()

    async def handle_request(self) -> None:
        raise NotImplementedError

    # --- responses ------------------------------------------------------------------------------

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif not message.get("more_body"):
            self.finished = True
        await self.base_send(message)

    async def send_error(self, exc: HttpError) -> None:
        if self.started:
            if not self.finished:
                await self.send_body(b"")
            return
        body, headers = exc.body()
        if exc.status == 404 and browsers.is_browser_visit(self.request):
            body, headers = browsers.not_found_page(self.request.path)  # a person, not a client (AMB-230)
        await self.send_response(exc.status, body, headers=headers + exc.headers + self.extra_headers)

    async def send_json(self, body: bytes, headers: Headers | None = None, status: int = 200) -> None:
        await self.send_response(status, body, headers=[JSON_CONTENT, *(headers or []), *self.extra_headers])

    async def send_empty(self, status: int, headers: Headers | None = None) -> None:
        await self.send_response(status, b"", headers=[*(headers or []), *self.extra_headers])

    async def start_sse(self, headers: Headers | None = None) -> None:
        await self.send_headers(status=200, headers=[*sse.SSE_HEADERS, *(headers or []), *self.extra_headers])
        # ASGI servers send the headers with the first body chunk; flush them now.
        await self.send_body(b"", more_body=True)

    async def send_chunk(self, data: bytes) -> None:
        await self.send_body(data, more_body=True)

    async def end_body(self) -> None:
        if self.started and not self.finished:
            await self.send_body(b"")

    def method_not_allowed(self) -> HttpError:
        allow = ", ".join(self.allowed_methods)
        return HttpError(
            405,
            f"Method {self.request.method} is not allowed here; use {allow}.",
            code=None,
            headers=[(b"allow", allow.encode())],
        )

    # --- request --------------------------------------------------------------------------------

    def client_address(self) -> str | None:
        """The client's address: the socket peer, or X-Forwarded-For when Daphne runs with
        --proxy-headers (MCP_PROXY_HEADERS=1), as Django's REMOTE_ADDR is (AMB-94)."""
        return self.request.client

    async def resolve_tenant(self) -> TenantInfo:
        """Check Host, find the tenant from the URL, check Origin; 400/404/403 otherwise."""
        origin.check_host(self.request)
        slug = self.route_kwargs["slug"]
        tenant = await catalog.get_tenant(slug)
        if tenant is None:
            # The same answer for unknown and inactive tenants.
            raise HttpError(404, f"No MCP server is published at {self.request.path}.", code=None)
        # Everything this request reads or writes is this tenant's: the database refuses the rest (AMB-96).
        wall.enter(wall.Scope((tenant.id,)))
        allowed = origin.allowed_origin(self.request, tenant)
        self.extra_headers = origin.cors_headers(allowed)
        return tenant

    async def read_body(self, tenant: TenantInfo) -> bytes:
        """Read the request body, refusing more than the tenant's limit with 413 (counted for /metrics).

        The tenant's `max_body_bytes` may only lower MCP_MAX_BODY_BYTES: the operator's setting bounds
        what one request may make a process hold. The 413 is plain text: no JSON-RPC id is known yet.
        """
        limit = settings.MCP_MAX_BODY_BYTES
        if tenant.max_body_bytes:
            limit = min(limit, tenant.max_body_bytes)

        def too_large() -> HttpError:
            quotas.count_refusal("body_size")
            return HttpError(
                413,
                f"The request body is larger than {limit} bytes, this server's limit; send less "
                "(a smaller batch, shorter arguments).",
                code=None,
            )

        declared = self.request.header("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_large()
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    # --- channel-layer streams -----------------------------------------------------------------

    async def run_stream(
        self,
        groups: list[str],
        on_event: Callable[[dict[str, Any]], Awaitable[bool]],
        on_idle: Callable[[], Awaitable[object]] | None = None,
        prelude: Callable[[], Awaitable[None]] | None = None,
        on_drain: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Join `groups`, run `prelude` (headers, first events), then forward channel-layer events
        until the client leaves or `on_event` (or `on_idle`, run at each keep-alive) returns False,
        or the process drains (streams/drain.py: `on_drain` sends the stream's last words)."""
        layer = get_channel_layer()
        assert layer is not None, "CHANNEL_LAYERS is configured (mcpsite/settings.py)"
        channel = await layer.new_channel()
        for group in groups:
            await layer.group_add(group, channel)
        # Joined before the client sees the stream open: anything published after that moment
        # (a list_changed, the answer to a legacy client's first POST) is already queued for us.
        if prelude is not None:
            try:
                await prelude()
            except BaseException:
                for group in groups:
                    await layer.group_discard(group, channel)
                raise
        failures = 0  # consecutive failed channel-layer reads

        async def next_event() -> dict[str, Any]:
            nonlocal failures
            while True:
                try:
                    event = await layer.receive(channel)
                except Exception as error:
                    # A Redis hiccup (timeout, reconnect) must not end the client's stream.
                    failures += 1
                    log = logger.warning if failures in (1, 10) else logger.debug
                    log("stream could not read from the channel layer (%s in a row): %r", failures, error)
                    await asyncio.sleep(min(0.05 * failures, 2.0))
                    continue
                failures = 0
                return event

        async def deliver(event: dict[str, Any]) -> bool | None:
            return await self._guarded(f"event {event.get('type')!r}", on_event(event))

        async def idle() -> bool | None:
            return await self._guarded("keep-alive", on_idle()) if on_idle is not None else None

        async def drained() -> None:
            if on_drain is not None:
                await self._guarded("drain", on_drain())

        source = pump.Watched(self, next_event, drains=True)
        try:
            await pump.pump(self, source, deliver, on_idle=idle, on_drain=drained)
        finally:
            source.close()
            for group in groups:
                try:
                    await layer.group_discard(group, channel)
                except Exception:
                    logger.warning("could not leave group %s", group, exc_info=True)

    async def _guarded(self, what: str, step: Awaitable[Any]) -> Any:
        """Run one step of a stream; an error is logged and the stream goes on (None returned)."""
        try:
            return await step
        except ClientGone:
            raise
        except Exception:
            logger.exception("stream step %s failed; the stream continues", what)
            return None
