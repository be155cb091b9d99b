"""The HTTP client every upstream connection uses: through the SSRF guard, pinned, observed per call.

`open_http_client` vets the upstream URL with the guard the `http` kind uses (core/ssrf.py: scheme,
allow-list, every resolved address public) and returns an httpx2 client (the SDK's HTTP library) whose
transport connects to the vetted address only (the name stays in Host and TLS SNI, so a second DNS
answer cannot move it) and refuses any other host. The transport also notes, for the call running in
the current context (`CallState`), what the wire said: the HTTP status of each reply and whether a
request never got a connection, which the client needs to tell "never reached the upstream" (safe to
send again) from "may have run".

For the HTTP+SSE transport (2024-11-05, AMB-186) the client also guards the session's GET stream: the
message endpoint it announces must be on the stream's own origin (`EndpointGuard`), and `on_lost` is
told when that stream ends or a message POST is refused, since the SDK's SSE client would otherwise
leave a request waiting for a reply that cannot come.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urljoin, urlparse

import httpx2
from django.conf import settings

from mcp_app.core import ssrf
from mcp_app.core.bucket import TokenBucket

USER_AGENT = "django-mcp-platform federation"
# An idle kept-alive connection is dropped after 2 s, below the 5 s of uvicorn, Node and many others: a
# server closing it just as we send on it would lose a request nobody can say did not run (AMB-158).
LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=2.0)

# A 2026-07-28 listen stream lives as long as the watch and is reopened by the SDK: no one call's reply.
LISTEN = "subscriptions/listen"

LogFn = Callable[[str, Any, str | None], Awaitable[None]]


@dataclass
class CallState:
    """One call's view of the wire and its log callback (set in a context variable around the call)."""

    on_log: LogFn | None = None
    statuses: list[int] = field(default_factory=list)
    unreached: bool = False
    # A pooled connection was ready for the call (a deadline past this point is a slow call).
    connected: bool = False
    # The upstream sent a message past MCP_UPSTREAM_MAX_MESSAGE_BYTES (its size limit, then).
    too_large: int | None = None
    # The call's deadline (client._exchange), paused while the upstream's question is with our caller.
    deadline: asyncio.Timeout | None = None
    pauses: int = 0
    left: float | None = None
    # What ended an HTTP+SSE stream before its endpoint was known (the SDK's client cannot report it).
    stream_error: BaseException | None = None
    # The upstream sent messages on the call's reply past its budget (burst, per second): AMB-188.
    flooded: tuple[float, float] | None = None
    # No token could be had for the upstream's OAuth client credentials (oauth.AuthRefused): AMB-198.
    auth_error: Exception | None = None

    def pause_deadline(self) -> None:
        """Stop the deadline's clock (questions may overlap: the first pause stops it)."""
        self.pauses += 1
        when = self.deadline.when() if self.deadline is not None else None
        if self.pauses == 1 and self.deadline is not None and when is not None:
            self.left = when - asyncio.get_running_loop().time()
            self.deadline.reschedule(None)

    def resume_deadline(self) -> None:
        """Start the clock again with the time that was left (the last pause ending does)."""
        self.pauses -= 1
        if self.pauses > 0 or self.deadline is None or self.left is None:
            return
        left, self.left = self.left, None
        with contextlib.suppress(RuntimeError):  # the exchange is over: no deadline left to keep
            self.deadline.reschedule(asyncio.get_running_loop().time() + max(left, 0.0))


# An SSE event ends at a blank line, in any of the three line endings the format allows.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class ReplyAbandoned(httpx2.SSEError, httpx2.StreamError):
    """A reply given up unread, which ends that one reply and not the client reading it (AMB-363).

    One SDK client carries every call of its pool key, each Streamable HTTP reply its own HTTP response.
    The SDK's client ends only the request whose reply fails with these: an SSE reply's SSEError (as
    for an event past its own size cap: no reconnection either, which a hostile upstream could make
    endless), a JSON reply's StreamError. Any other error reading one reply ends the client's task
    group, and with it every call on the client. httpx closes the half-read HTTP connection itself.
    """


class MessageTooLarge(ReplyAbandoned):
    """An upstream's message outgrew MCP_UPSTREAM_MAX_MESSAGE_BYTES: the reply is abandoned unread."""


class TooManyMessages(ReplyAbandoned):
    """An upstream sent one call's reply more messages than its budget: the reply is abandoned unread."""


class CappedStream(httpx2.AsyncByteStream):
    """A reply's body, abandoned once one message in it passes ``limit`` bytes, or once its events
    outrun ``budget`` (a call's reply stream, AMB-188; any other stream, the connection's, AMB-195).

    A JSON reply is one message. An SSE reply is counted per event (bytes since the last blank line),
    so a long-lived stream is not cut for its age, only for one event too large or too many too fast.
    The events are counted here, before the SDK parses them: parsing a flood is what costs the loop.
    """

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        limit: int,
        sse: bool,
        state: CallState | None,
        budget: TokenBucket | None = None,
        on_flood: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.limit = limit
        self.sse = sse
        self.state = state
        self.budget = budget
        self.on_flood = on_flood

    async def __aiter__(self) -> Any:
        pending = 0  # bytes of the message under way
        async for chunk in self.inner:
            start = 0
            if self.sse:
                for end in _EVENT_END.finditer(chunk):
                    self._check(pending + end.start() - start)
                    self._count()
                    pending, start = 0, end.end()
            pending += len(chunk) - start
            self._check(pending)
            yield chunk

    def _count(self) -> None:
        if self.budget is None or self.budget.take():
            return
        if self.state is not None:
            self.state.flooded = (self.budget.burst, self.budget.per_second)
        if self.on_flood is not None:
            self.on_flood()
        raise TooManyMessages("an upstream sent messages past its budget")

    def _check(self, size: int) -> None:
        if size > self.limit:
            if self.state is not None:
                self.state.too_large = self.limit
            raise MessageTooLarge(f"an upstream message passed {self.limit} bytes")

    async def aclose(self) -> None:
        await self.inner.aclose()


class EndpointRefused(httpx2.TransportError):
    """An HTTP+SSE server announced a message endpoint we will not post to."""


class EndpointGuard(httpx2.AsyncByteStream):
    """An HTTP+SSE session's GET stream, held back until its `endpoint` event is vetted.

    The endpoint must be on the stream's origin (its POSTs carry the upstream's credentials). A stream
    refused, broken or ended before that event ends quietly, its reason in ``state.stream_error``: the
    SDK's client reports a failure there by waiting for ever. Once the stream is past it, its end (the
    upstream restarted, the session expired) is reported to ``on_lost``.
    """

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        url: str,
        limit: int,
        state: CallState | None,
        on_lost: Callable[[], None],
    ) -> None:
        self.inner = inner
        self.url = url
        self.limit = limit
        self.state = state
        self.on_lost = on_lost

    async def __aiter__(self) -> Any:
        held = b""
        vetted = False
        try:
            async for chunk in self.inner:
                if vetted:
                    yield chunk
                    continue
                held += chunk
                vetted = self._vet(held)
                if vetted:
                    yield held
                    held = b""
            if not vetted:
                raise EndpointRefused("the stream ended before it announced its message endpoint")
        except (httpx2.TransportError, OSError) as exc:
            if vetted:
                raise
            if self.state is not None:
                self.state.stream_error = exc
        finally:
            self.on_lost()

    def _vet(self, held: bytes) -> bool:
        """True once ``held`` has an acceptable endpoint event; raises EndpointRefused for another origin."""
        for event in _EVENT_END.split(held)[:-1]:
            fields: dict[str, list[str]] = {}
            for line in event.decode("utf-8", "replace").splitlines():
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value.removeprefix(" "))
            if fields.get("event") != ["endpoint"]:
                continue
            endpoint = urljoin(self.url, "\n".join(fields.get("data", [])))
            there, here = urlparse(endpoint), urlparse(self.url)
            # As the SDK compares them (it would fail by hanging): scheme and authority, as written.
            if (there.scheme, there.netloc) != (here.scheme, here.netloc):
                origin = f"{there.scheme}://{there.hostname or ''}"
                raise EndpointRefused(f"its message endpoint is on another origin ({origin})")
            return True
        if len(held) > self.limit:
            raise EndpointRefused("it sent no message endpoint")
        return False

    async def aclose(self) -> None:
        await self.inner.aclose()


def message_budget() -> TokenBucket:
    """The messages one call's reply may carry: a burst, then so many a second (AMB-188)."""
    return TokenBucket(
        float(settings.MCP_UPSTREAM_MESSAGE_BURST), float(settings.MCP_UPSTREAM_MESSAGES_PER_SECOND)
    )


CURRENT_CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar(
    "mcp_federation_call", default=None
)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs milliseconds: once per process.
    return httpx2.create_ssl_context()


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Send every request to the vetted address of the one host this client may reach."""

    def __init__(
        self,
        vetted: ssrf.Target,
        on_lost: Callable[[], None] | None = None,
        on_flood: Callable[[], None] | None = None,
    ) -> None:
        self.vetted = vetted
        # Set for an HTTP+SSE session (see the module's docstring).
        self.on_lost = on_lost
        # Every stream that is not one call's reply (a session's GET stream, reopened as often as the
        # upstream likes; an HTTP+SSE session's one stream, which carries every call's messages) draws
        # on this one budget, so a reconnection never earns a fresh burst (AMB-195).
        self.stream_budget = message_budget()
        self.on_flood = on_flood
        self.inner = httpx2.AsyncHTTPTransport(verify=_ssl_context(), trust_env=False, limits=LIMITS)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        state = CURRENT_CALL.get()
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if (url.scheme, url.host, port) != (self.vetted.scheme, self.vetted.host.lower(), self.vetted.port):
            raise httpx2.ConnectError("refused: not the vetted upstream host", request=request)
        request.url = url.copy_with(host=self.vetted.ip)
        if self.vetted.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": self.vetted.host}
        try:
            response = await self.inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout):
            if state is not None:
                state.unreached = True
            self._post_failed(request)
            raise
        except httpx2.TransportError:
            self._post_failed(request)
            raise
        if state is not None:
            state.statuses.append(response.status_code)
        if response.status_code >= 400:
            self._post_failed(request)
        sse = "text/event-stream" in response.headers.get("content-type", "")
        limit = int(settings.MCP_UPSTREAM_MAX_MESSAGE_BYTES)
        stream: httpx2.AsyncByteStream
        body = cast(httpx2.AsyncByteStream, response.stream)  # an async transport's reply: an async stream
        if not sse:
            stream = CappedStream(body, limit, sse, state)
        elif request.method == "POST" and state is not None and request.headers.get("mcp-method") != LISTEN:
            # A call's reply stream has a budget of its own (AMB-188).
            stream = CappedStream(body, limit, sse, state, message_budget())
        else:
            stream = CappedStream(body, limit, sse, state, self.stream_budget, self.on_flood)
        if self.on_lost is not None and sse and request.method == "GET":
            stream = EndpointGuard(stream, str(url), limit, state, self.on_lost)
        response.stream = stream
        return response

    def _post_failed(self, request: httpx2.Request) -> None:
        # An HTTP+SSE message POST that failed is a reply that will never come on the stream.
        if self.on_lost is not None and request.method == "POST":
            self.on_lost()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def open_http_client(
    url: str,
    headers: tuple[tuple[str, str], ...],
    connect_seconds: float,
    on_lost: Callable[[], None] | None = None,
    on_flood: Callable[[], None] | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An unopened httpx2 client for ``url``'s upstream; raises ssrf.SsrfRefused when the URL is refused.

    ``on_lost`` makes it an HTTP+SSE session's client (see the module's docstring); ``on_flood`` hears
    that a stream other than a call's reply outran the connection's budget of messages (AMB-195).
    """
    vetted = await ssrf.vet_url(url)
    # Read timeout: none of our own; every call carries its deadline (client.py), SSE streams idle.
    timeout = httpx2.Timeout(connect_seconds, read=None, write=connect_seconds, pool=connect_seconds)
    return httpx2.AsyncClient(
        transport=PinnedTransport(vetted, on_lost, on_flood),
        headers={"User-Agent": USER_AGENT, **dict(headers)},
        auth=auth,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
    )
