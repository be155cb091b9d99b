"""The cancel listener survives Redis read errors quietly (UT-10..14 across processes)."""

from __future__ import annotations

import asyncio
import logging

from mcp_app.streams import inflight


class FlakyLayer:
    """A channel layer whose reads time out `failures` times, then deliver one cancel, then block."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.delivered = asyncio.Event()

    async def receive(self, channel: str) -> dict:
        if self.failures:
            self.failures -= 1
            raise TimeoutError("Timeout reading from 127.0.0.1:6379")
        if not self.delivered.is_set():
            self.delivered.set()
            return {"type": "mcp.cancel", "session_id": "s1", "request_id": 1, "reason": "x"}
        await asyncio.Event().wait()
        return {}


async def test_ut10_read_timeouts_are_retried_with_one_warning_and_a_cancel_still_arrives(
    caplog, monkeypatch
):
    monkeypatch.setattr(inflight.asyncio, "sleep", fast_sleep)
    listener = inflight._Listener()
    listener.joined.add("s1")
    task = asyncio.get_running_loop().create_task(asyncio.Event().wait())
    cancelled = asyncio.Event()
    inflight._running[("s1", inflight._key(1))] = inflight.InFlight(task, cancelled)
    layer = FlakyLayer(failures=5)
    caplog.set_level(logging.DEBUG, logger="mcp_app.streams.inflight")
    receiver = asyncio.get_running_loop().create_task(listener._receive(layer, "chan"))
    try:
        await asyncio.wait_for(layer.delivered.wait(), 5)
        await asyncio.wait_for(cancelled.wait(), 5)
    finally:
        receiver.cancel()
        task.cancel()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "retrying" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]  # no traceback spam


async def test_the_listener_stops_quietly_when_no_request_is_waiting_for_a_cancel(caplog):
    listener = inflight._Listener()
    listener.task = asyncio.current_task()
    await asyncio.wait_for(listener._receive(FlakyLayer(failures=1), "chan"), 5)
    assert listener.task is None  # the next long request starts a new receive loop
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


_real_sleep = asyncio.sleep


async def fast_sleep(seconds: float) -> None:
    await _real_sleep(0)


async def test_quick_requests_share_one_timer_and_only_a_request_still_running_joins_its_session(monkeypatch):
    """Each quick request used to leave a timer of its own in the loop's heap (one per request, a
    join whenever one fired while a later request of the session ran); now one timer checks them all."""
    loop = asyncio.get_running_loop()
    timers = []
    call_at = loop.call_at

    def counted(*args, **kwargs):  # call_later goes through call_at too
        timers.append(args)
        return call_at(*args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    listener = inflight._Listener()
    joined: list[str] = []

    async def join(session_id: str) -> None:
        joined.append(session_id)

    monkeypatch.setattr(listener, "_join", join)
    for _ in range(100):  # quick requests of two sessions, one after the other
        for session_id in ("s1", "s2"):
            listener.watch(session_id)
            listener.unwatch(session_id)
    assert len(timers) == 1
    started = loop.time()
    listener.watch("s1")  # a long request
    async with asyncio.timeout(5):
        while not joined:
            await asyncio.sleep(0.01)
    assert joined == ["s1"] and listener.joined == {"s1"}
    assert loop.time() - started >= inflight.LISTEN_AFTER_SECONDS - 0.01  # not before its delay
    listener.unwatch("s1")
    assert not listener.joined
