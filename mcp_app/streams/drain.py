"""Graceful shutdown: on SIGTERM a serving process drains instead of dropping what it holds.

Under Daphne (transport/daphne_tuning.py wraps its shutdown): the listening sockets close first, so
the load balancer sends new connections elsewhere; a request arriving on a connection already open
gets 503 with Retry-After; POST exchanges in flight finish (their responses written), up to
MCP_SHUTDOWN_GRACE_SECONDS; every open stream ends at once so its client reconnects to another
process (a legacy GET stream's client resumes with Last-Event-ID from the shared event store, a 2026-07-28 `subscriptions/listen` stream gets its
`SubscriptionsListenResult`, as the spec has it for a server that shuts down). What is still running
after the grace period is cancelled by Daphne as before (its events were stored: the client resumes).
"""

from __future__ import annotations

import asyncio
import logging
import weakref

logger = logging.getLogger(__name__)

_draining = False
_in_flight = 0
# One event per event loop (an asyncio.Event belongs to the loop that first waits on it; tests run
# many loops in one process, a server one).
_events: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = weakref.WeakKeyDictionary()


def started() -> asyncio.Event:
    """Set once draining began: an open stream waits on it."""
    loop = asyncio.get_running_loop()
    event = _events.get(loop)
    if event is None:
        event = _events[loop] = asyncio.Event()
        if _draining:
            event.set()
    return event


def draining() -> bool:
    return _draining


def request_began() -> None:
    global _in_flight
    _in_flight += 1


def request_ended() -> None:
    global _in_flight
    _in_flight -= 1


def in_flight() -> int:
    return _in_flight


async def drain(grace_seconds: float) -> int:
    """Begin draining; return once no call is in flight or the grace period is over (what was left)."""
    global _draining
    _draining = True
    for event in list(_events.values()):
        event.set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds
    logger.info("draining: %s request(s) in flight, up to %.0f s", _in_flight, grace_seconds)
    while _in_flight > 0 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    if _in_flight:
        logger.warning(
            "drained for %.0f s; %s request(s) still running are cancelled", grace_seconds, _in_flight
        )
    return _in_flight


def reset() -> None:
    """Forget a drain (tests)."""
    global _draining, _in_flight
    _draining, _in_flight = False, 0
    _events.clear()
