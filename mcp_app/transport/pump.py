"""The one loop every SSE stream runs: send what its source yields, keep-alives while idle, end it.

A stream differs from another only in what is passed here: the source of its next item (a queue, the
channel layer, the event store), what sending an item means and whether it ends the stream, a polling
close at a deadline with its last words (AMB-128), a step at each keep-alive (a slot's or a session's
TTL refresh, a token check), and whether the client leaving or the process draining (streams/drain.py)
ends it, which `Watched` adds to a source. The stream's opening (headers, a priming event, a replay)
and its closing (`end_body`) stay with its consumer.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from django.conf import settings

from mcp_app.streams import drain
from mcp_app.transport import sse


class Signal(enum.Enum):
    """What a source yields instead of an item."""

    IDLE = "idle"  # its wait passed with nothing to send
    GONE = "gone"  # the client closed the connection
    DRAINED = "drained"  # the process began draining


class End(enum.Enum):
    """Why a stream's pump returned."""

    SOURCE = "source"  # `deliver` or `on_idle` said the stream is over
    DEADLINE = "deadline"
    GONE = "gone"
    DRAINED = "drained"


class Client(Protocol):
    """The consumer a stream is written to."""

    finished: bool
    receive: Callable[[], Awaitable[dict[str, Any]]]

    async def send_chunk(self, data: bytes) -> None: ...


Source = Callable[[float], Awaitable[Any]]  # the next item within `timeout` seconds, or Signal.IDLE


def _never() -> bool:
    return False


async def pump(
    client: Client,
    source: Source,
    deliver: Callable[[Any], Awaitable[bool | None]],
    *,
    on_idle: Callable[[], Awaitable[bool | None]] | None = None,
    deadline: float | None = None,
    on_deadline: Callable[[], Awaitable[None]] | None = None,
    ready: Callable[[], bool] = _never,
    on_drain: Callable[[], Awaitable[None]] | None = None,
) -> End:
    """Deliver the source's items until one of them, the deadline, the client or a drain ends it.

    A keep-alive comment goes out after MCP_SSE_KEEPALIVE_SECONDS without an item, then `on_idle`
    runs (False ends the stream). At `deadline` (time.monotonic) the stream ends with `on_deadline`'s
    last words once `ready` says nothing is waiting; no keep-alive is sent just before that close.
    """
    keepalive = settings.MCP_SSE_KEEPALIVE_SECONDS
    while True:
        wait: float = keepalive
        if deadline is not None:
            wait = min(keepalive, max(0.0, deadline - time.monotonic()))
            if wait == 0.0 and not ready():
                if on_deadline is not None:
                    await on_deadline()
                return End.DEADLINE
        item = await source(wait)
        if item is Signal.IDLE:
            if deadline is None or time.monotonic() < deadline:
                await client.send_chunk(sse.KEEPALIVE)
                if on_idle is not None and await on_idle() is False:
                    return End.SOURCE
        elif item is Signal.GONE:
            return End.GONE
        elif item is Signal.DRAINED:
            if on_drain is not None:
                await on_drain()
            return End.DRAINED
        elif await deliver(item) is False:
            return End.SOURCE


def from_queue(queue: asyncio.Queue) -> Source:
    """A source reading a queue (no task: a queued item is taken without suspending)."""

    async def next_item(timeout: float) -> Any:
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
            # lands as the queue yields, and the stream would then outlive its connection.
            async with asyncio.timeout(timeout):
                return await queue.get()
        except TimeoutError:
            return Signal.IDLE

    return next_item


class Watched:
    """A source raced against the client leaving and, for a stream a drain ends, the drain.

    Its futures persist across waits (a keep-alive cancels nothing, so no item is lost to a
    timeout); `close` cancels them. `gone` and `first` hand over futures the caller already started.
    """

    def __init__(
        self,
        client: Client,
        produce: Callable[[], Awaitable[Any]],
        *,
        drains: bool,
        gone: asyncio.Future | None = None,
        first: asyncio.Future | None = None,
    ) -> None:
        self.client = client
        self.produce = produce
        self.gone = gone if gone is not None else asyncio.ensure_future(client.receive())
        self.item = first if first is not None else asyncio.ensure_future(produce())
        self.drained = asyncio.ensure_future(drain.started().wait()) if drains else None

    async def __call__(self, timeout: float) -> Any:
        while True:
            watched = {self.gone, self.item} if self.drained is None else {self.gone, self.item, self.drained}
            done, _ = await asyncio.wait(watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                return Signal.IDLE
            if self.drained in done:
                return Signal.DRAINED
            if self.gone in done:
                if self.gone.result().get("type") == "http.disconnect":
                    self.client.finished = True  # nothing more can be sent
                    return Signal.GONE
                self.gone = asyncio.ensure_future(self.client.receive())
            if self.item in done:
                item = self.item.result()
                self.item = asyncio.ensure_future(self.produce())
                return item

    def close(self) -> None:
        for future in (self.gone, self.item, self.drained):
            if future is not None:
                future.cancel()
