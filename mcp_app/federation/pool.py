"""Connections to upstreams, kept and reused per pool key, in the serving process.

A `Connection` is one SDK `Client`: for a legacy upstream, one MCP session (its `initialize` done
once, JSON-RPC calls multiplexed on it); for a 2026-07-28 upstream, no session, only its discover
result and HTTP keep-alive. Each is owned by a keeper task, because the SDK's client holds task
groups that must be entered and left by one task; calls from any task use it meanwhile.

Bounds: at most ``MCP_UPSTREAM_MAX_SESSIONS`` connections per upstream (different callers or
credentials make different keys). A new key past the bound takes the place of the least recently
used idle connection; when none is idle it waits up to ``MCP_UPSTREAM_POOL_WAIT_SECONDS``, then fails
with a clear error. A connection idle for ``MCP_UPSTREAM_IDLE_SECONDS`` closes itself (a legacy
session is ended with DELETE). `close_all` closes every connection of this event loop (shutdown, tests).

An HTTP+SSE upstream (2024-11-05 transport, AMB-186) is a legacy session on the SDK's SSE client, over
the same guarded HTTP client. It is discarded as soon as its GET stream ends or a message POST fails
(the session is gone; the calls on it get a connection error). Every message of such a session comes
on that one stream, not on the call's: a log or a question is the call's when exactly one call is
running on the connection, and otherwise belongs to no call (a question is refused, a log dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx2
import mcp_types as types
from django.conf import settings
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_app.federation import breaker, failures, oauth, questions, transport
from mcp_app.federation.errors import UpstreamBusy
from mcp_app.federation.target import SSE, Target
from mcp_app.federation.transport import CURRENT_CALL, CallState

CLIENT_INFO = types.Implementation(name="django-mcp-platform", version="1.0")


async def _route_log(params: types.LoggingMessageNotificationParams) -> None:
    """Hand a log message to the call it belongs to (the SDK delivers it in that call's context)."""
    state = CURRENT_CALL.get()
    if state is not None and state.on_log is not None:
        await state.on_log(params.level, params.data, params.logger)


@contextlib.asynccontextmanager
async def sdk_client(
    target: Target,
    on_lost: Callable[[], None] | None = None,
    on_flood: Callable[[], None] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """An SDK client of ``target`` over the guarded HTTP client (transport.py), ``options`` passed to it.

    ``on_lost`` hears that an HTTP+SSE session's stream ended (a Streamable HTTP one has no such stream);
    ``on_flood`` that a stream no one call owns outran the connection's budget of messages (AMB-195).
    """
    sse = target.transport == SSE
    http = await transport.open_http_client(
        target.url,
        target.headers,
        float(settings.MCP_UPSTREAM_CONNECT_SECONDS),
        on_lost=on_lost if sse else None,
        on_flood=on_flood,
        auth=oauth.ClientCredentialsAuth(target.url, target.oauth, target.label) if target.oauth else None,
    )
    if sse:
        # The SDK's SSE client opens and closes the HTTP client it is given itself, and the 2024-11-05
        # transport knows no 2026-07-28 discover, only a handshake.
        def given_client(
            headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
        ) -> httpx2.AsyncClient:
            return http  # configured by open_http_client above; the SDK's own settings are not wanted

        streams: Any = sse_client(target.url, httpx_client_factory=given_client)
        owner: AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        mode = "legacy"
    else:
        # No size cap of the SDK's own (1 MiB an SSE event): transport.CappedStream bounds every message
        # at MCP_UPSTREAM_MAX_MESSAGE_BYTES, before the SDK sees it, and its error names that bound.
        streams = streamable_http_client(target.url, http_client=http, max_sse_event_size=None)
        owner, mode = http, target.mode
    async with owner, Client(streams, mode=mode, cache=None, client_info=CLIENT_INFO, **options) as client:
        yield client


class Connection:
    """One kept SDK client for one pool key."""

    def __init__(self, pool: Pool, target: Target) -> None:
        self.pool = pool
        self.target = target
        self.key = target.pool_key
        self.client: Any = None
        self.in_flight = 0
        self.last_used = time.monotonic()
        self.closed = False
        # Handed to no new call; closed once the calls on it have ended (Pool.retire).
        self.retiring = False
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Read once here, so a failed opening nobody waits for any more is not reported as unretrieved.
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        # The calls running on it, with their question bridges (an HTTP+SSE session routes by them).
        self.calls: list[tuple[CallState, questions.Bridge | None]] = []
        # What the keeper's own exchanges saw: the opening, and an HTTP+SSE session's one stream.
        self.keeper_state = CallState()
        self._stop = asyncio.Event()
        # A context of its own: the keeper must not inherit the opening call's CURRENT_CALL.
        self.task = asyncio.get_running_loop().create_task(self._keep(), context=contextvars.Context())

    @property
    def legacy(self) -> bool:
        """True for a handshake-era session (one an upstream restart loses)."""
        return self.client is not None and self.client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS

    def _lost(self) -> None:
        """The HTTP+SSE session's stream ended or a message of it was refused: no reply will come."""
        if not self.closed:
            self.pool.discard(self)

    def _flooded(self) -> None:
        """A stream of this connection outran its budget (AMB-195): the upstream pauses, as for a
        flooded call (AMB-188), and the connection takes no new call. On HTTP+SSE that stream carried
        the replies of the calls on it: they end (the stream's end discards the connection) saying why."""
        breaker.trip(self.target)
        if self.target.transport == SSE:
            for state, _bridge in self.calls:
                state.flooded = self.keeper_state.flooded
        if not self.closed:
            self.pool.retire(self)

    def _in_sole_call(self, callback: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """``callback``, run in the context of the one call on this connection when its message came on the stream."""

        async def run(*args: Any) -> Any:
            if CURRENT_CALL.get() is not self.keeper_state or len(self.calls) != 1:
                return await callback(*args)
            state, bridge = self.calls[0]
            call_token = CURRENT_CALL.set(state)
            bridge_token = questions.CURRENT.set(bridge)
            try:
                return await callback(*args)
            finally:
                questions.CURRENT.reset(bridge_token)
                CURRENT_CALL.reset(call_token)

        return run

    async def _keep(self) -> None:
        state = self.keeper_state
        CURRENT_CALL.set(state)
        target = self.target
        sse = target.transport == SSE
        # An HTTP+SSE session's callbacks find their call (see the module's docstring).
        routed = self._in_sole_call if sse else (lambda callback: callback)
        try:
            async with sdk_client(
                target,
                self._lost,
                self._flooded,
                logging_callback=routed(_route_log),
                # Declared to every upstream, whoever calls: the session is shared by the calls of its
                # key, whose clients differ; a question one caller cannot answer gets that caller's
                # error (questions.py, AMB-176).
                elicitation_callback=routed(questions.on_elicit),
                sampling_callback=routed(questions.on_sample),
                list_roots_callback=routed(questions.on_list_roots),
            ) as client:
                self.client = client
                self.ready.set_result(None)
                await self._idle_out()
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure to open is the opener's to report
            if not self.ready.done():
                self.ready.set_exception(failures.failure(target, state, exc))
        finally:
            self.closed = True
            self.pool.forget(self)

    async def _idle_out(self) -> None:
        idle = float(settings.MCP_UPSTREAM_IDLE_SECONDS)
        while not self._stop.is_set():
            left = idle - (time.monotonic() - self.last_used)
            if self.in_flight == 0 and left <= 0:
                return
            try:
                await asyncio.wait_for(
                    self._stop.wait(), timeout=max(left, 0.05) if self.in_flight == 0 else idle
                )
            except TimeoutError:
                continue

    def stop(self) -> None:
        """Ask the keeper to close the client (calls still running on it get a connection error)."""
        self._stop.set()


class Pool:
    """The connections of one event loop."""

    def __init__(self) -> None:
        self.connections: dict[tuple[Any, ...], Connection] = {}
        self.by_upstream: dict[tuple[int, int], set[Connection]] = {}
        self.changed = asyncio.Event()

    def forget(self, connection: Connection) -> None:
        if self.connections.get(connection.key) is connection:
            del self.connections[connection.key]
        self.by_upstream.get(connection.target.upstream_key, set()).discard(connection)
        self._announce()

    def _announce(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def _make_room(self, target: Target) -> None:
        deadline = time.monotonic() + float(settings.MCP_UPSTREAM_POOL_WAIT_SECONDS)
        bound = int(settings.MCP_UPSTREAM_MAX_SESSIONS)
        while len(members := self.by_upstream.get(target.upstream_key, set())) >= bound:
            idle = [c for c in members if c.in_flight == 0]
            if idle:
                oldest = min(idle, key=lambda c: c.last_used)
                self.forget(oldest)
                oldest.stop()
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamBusy(
                    f"Upstream {target.label} has all its {bound} connections busy; try again shortly.",
                    retry_after=1,
                )
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=left)
            except TimeoutError:
                continue

    async def acquire(self, target: Target) -> tuple[Connection, bool]:
        """A ready connection for ``target`` and whether it was opened for this call; release it after."""
        connection = self.connections.get(target.pool_key)
        fresh = False
        if connection is None or connection.closed:
            await self._make_room(target)
            connection = self.connections.get(target.pool_key)
            if connection is None or connection.closed:
                connection = Connection(self, target)
                self.connections[connection.key] = connection
                self.by_upstream.setdefault(target.upstream_key, set()).add(connection)
                fresh = True
        connection.in_flight += 1
        try:
            # Shielded: a caller that stops waiting must not cancel an opening others may share.
            await asyncio.shield(connection.ready)
        except BaseException:
            self.release(connection)
            raise
        return connection, fresh

    def release(self, connection: Connection) -> None:
        connection.in_flight -= 1
        connection.last_used = time.monotonic()
        if connection.retiring and connection.in_flight == 0:
            connection.stop()
        self._announce()

    def retire(self, connection: Connection) -> None:
        """Hand ``connection`` to no new call, and close it once the calls still on it have ended.

        One client serves every call of its key at once: what makes it unfit for the next call (an
        HTTP exchange abandoned mid-reply) must not cut the replies the other calls are reading.
        It still counts against the upstream's bound until it has closed.
        """
        if self.connections.get(connection.key) is connection:
            del self.connections[connection.key]
        connection.retiring = True
        if connection.in_flight == 0:
            connection.stop()

    def discard(self, connection: Connection) -> None:
        """Stop using ``connection`` (its session is gone or broken); the next call opens a new one."""
        self.forget(connection)
        connection.stop()

    async def close_all(self) -> None:
        members = list(self.connections.values()) + [c for s in self.by_upstream.values() for c in s]
        for connection in members:
            connection.stop()
        tasks = {c.task for c in members}
        if tasks:
            await asyncio.wait(tasks, timeout=float(settings.MCP_UPSTREAM_CONNECT_SECONDS))
        for task in tasks:
            if not task.done():
                task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool] = weakref.WeakKeyDictionary()


def current() -> Pool:
    """This event loop's pool (each loop keeps its own: the SDK's clients belong to one loop)."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = Pool()
    return pool


async def close_all() -> None:
    """Close every connection of the running loop's pool and wait for their keepers to end."""
    pool = _POOLS.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close_all()
