"""The one SSE pump (transport/pump.py): keep-alives while idle, the polling close, and what ends it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_app.streams import drain
from mcp_app.transport import pump, sse

TIMEOUT = 5  # every stream here ends well within it
LAST_WORDS = b"retry: 1000\n\n"
END = "end"


class Writer:
    """The consumer side of a stream: what was sent, and a client that leaves when told."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.finished = False
        self.leave = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send_chunk(self, data: bytes) -> None:
        self.chunks.append(data)


async def deliver_into(writer: Writer, item: Any) -> bool:
    if item == END:
        return False
    await writer.send_chunk(item)
    return True


@pytest.fixture(autouse=True)
def undrained() -> Iterator[None]:
    drain.reset()
    yield
    drain.reset()


@pytest.fixture
def quick_keepalive(settings) -> float:
    settings.MCP_SSE_KEEPALIVE_SECONDS = 0.1
    return 0.1


async def test_an_idle_stream_gets_a_keep_alive_each_interval_and_runs_its_idle_step(quick_keepalive):
    writer = Writer()
    idles = 0

    async def on_idle() -> bool:
        nonlocal idles
        idles += 1
        return idles < 3  # the third keep-alive's step ends the stream

    started = time.monotonic()
    end = await asyncio.wait_for(
        pump.pump(
            writer, pump.from_queue(asyncio.Queue()), lambda item: deliver_into(writer, item), on_idle=on_idle
        ),
        TIMEOUT,
    )
    assert end is pump.End.SOURCE
    assert writer.chunks == [sse.KEEPALIVE] * 3
    assert time.monotonic() - started >= 3 * quick_keepalive


async def test_an_item_restarts_the_keep_alive_interval(settings):
    settings.MCP_SSE_KEEPALIVE_SECONDS = 0.3
    writer = Writer()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    for delay, item in ((0.1, b"a"), (0.2, b"b"), (0.3, END)):
        loop.call_later(delay, queue.put_nowait, item)
    await asyncio.wait_for(
        pump.pump(writer, pump.from_queue(queue), lambda item: deliver_into(writer, item)), TIMEOUT
    )
    assert writer.chunks == [b"a", b"b"]


async def test_the_polling_close_at_the_deadline_has_no_keep_alive_right_before_it(settings):
    settings.MCP_SSE_KEEPALIVE_SECONDS = 0.2
    writer = Writer()

    async def close() -> None:
        await writer.send_chunk(LAST_WORDS)

    started = time.monotonic()
    end = await asyncio.wait_for(
        pump.pump(
            writer,
            pump.from_queue(asyncio.Queue()),
            lambda item: deliver_into(writer, item),
            deadline=started + 0.3,
            on_deadline=close,
        ),
        TIMEOUT,
    )
    assert end is pump.End.DEADLINE
    # One keep-alive at 0.2 s; the wait that reaches the deadline (0.1 s later) ends in the close alone.
    assert writer.chunks == [sse.KEEPALIVE, LAST_WORDS]
    assert time.monotonic() - started >= 0.3


async def test_items_waiting_at_the_deadline_go_out_before_the_close(quick_keepalive):
    writer = Writer()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in (b"a", b"b"):
        queue.put_nowait(item)

    async def close() -> None:
        await writer.send_chunk(LAST_WORDS)

    end = await asyncio.wait_for(
        pump.pump(
            writer,
            pump.from_queue(queue),
            lambda item: deliver_into(writer, item),
            deadline=time.monotonic(),
            on_deadline=close,
            ready=lambda: not queue.empty(),
        ),
        TIMEOUT,
    )
    assert end is pump.End.DEADLINE
    assert writer.chunks == [b"a", b"b", LAST_WORDS]


async def test_the_source_ending_ends_the_stream_after_what_came_before(quick_keepalive):
    writer = Writer()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in (b"a", b"b", END, b"never sent"):
        queue.put_nowait(item)
    end = await asyncio.wait_for(
        pump.pump(writer, pump.from_queue(queue), lambda item: deliver_into(writer, item)), TIMEOUT
    )
    assert end is pump.End.SOURCE
    assert writer.chunks == [b"a", b"b"]


async def test_a_drain_ends_a_watched_stream_with_its_last_words(settings):
    settings.MCP_SSE_KEEPALIVE_SECONDS = 10  # the drain, not a keep-alive, wakes it
    writer = Writer()
    source = pump.Watched(writer, asyncio.Queue().get, drains=True)

    async def last_words() -> None:
        await writer.send_chunk(LAST_WORDS)

    try:
        running = asyncio.ensure_future(
            pump.pump(writer, source, lambda item: deliver_into(writer, item), on_drain=last_words)
        )
        await asyncio.sleep(0)  # the stream waits
        assert not running.done()
        await drain.drain(0)
        assert await asyncio.wait_for(running, TIMEOUT) is pump.End.DRAINED
    finally:
        source.close()
    assert writer.chunks == [LAST_WORDS]


async def test_a_drain_leaves_a_stream_that_does_not_end_on_it_running(quick_keepalive):
    writer = Writer()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    source = pump.Watched(writer, queue.get, drains=False)
    try:
        running = asyncio.ensure_future(pump.pump(writer, source, lambda item: deliver_into(writer, item)))
        await drain.drain(0)
        queue.put_nowait(b"after the drain")
        queue.put_nowait(END)
        assert await asyncio.wait_for(running, TIMEOUT) is pump.End.SOURCE
    finally:
        source.close()
    assert b"after the drain" in writer.chunks


async def test_the_client_leaving_ends_a_watched_stream(quick_keepalive):
    writer = Writer()
    source = pump.Watched(writer, asyncio.Queue().get, drains=True)
    asyncio.get_running_loop().call_later(0.25, writer.leave.set)
    try:
        end = await asyncio.wait_for(
            pump.pump(writer, source, lambda item: deliver_into(writer, item)), TIMEOUT
        )
    finally:
        source.close()
    assert end is pump.End.GONE
    assert writer.finished  # nothing more may be sent
    assert writer.chunks == [sse.KEEPALIVE, sse.KEEPALIVE]


async def test_a_watched_source_keeps_its_pending_item_across_keep_alives(quick_keepalive):
    writer = Writer()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    source = pump.Watched(writer, queue.get, drains=False)
    loop = asyncio.get_running_loop()
    loop.call_later(0.25, queue.put_nowait, b"late")
    loop.call_later(0.3, queue.put_nowait, END)
    try:
        await asyncio.wait_for(pump.pump(writer, source, lambda item: deliver_into(writer, item)), TIMEOUT)
    finally:
        source.close()
    assert [chunk for chunk in writer.chunks if chunk != sse.KEEPALIVE] == [b"late"]
