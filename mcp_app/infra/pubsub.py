"""A Redis pub/sub channel each event loop of the process listens to, for cache invalidation.

Used where a process keeps something in memory and another process may change it: the in-process
caches (infra/cache.py, one channel for all) and the tenants' change tokens (catalog/tokens). A message lost while a
loop was not subscribed cannot be detected, so whenever the subscription (re)starts or fails the
owner's `on_reset` drops everything it holds; `generation` counts those starts, so a reader can tell
whether the subscription it relied on is still the same one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from mcp_app.infra import redis_client

logger = logging.getLogger(__name__)


class Subscriber:
    """One channel, one listening task per event loop (Daphne has one; tests and workers have many)."""

    def __init__(
        self, channel: str, on_message: Callable[[Any], None], on_reset: Callable[[], None], what: str
    ):
        self.channel = channel
        self.on_message = on_message
        self.on_reset = on_reset
        self.what = what
        self.generation = 0
        self._tasks: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}
        self._listening: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}
        self._lock = threading.Lock()

    def ensure(self) -> None:
        """Start this loop's listener if it is not running (Redis only)."""
        if not redis_client.enabled():
            return
        loop = asyncio.get_running_loop()
        task = self._tasks.get(loop)
        if task is not None and not task.done():
            return
        # Loops of several threads (a thread-pool Celery worker) may start theirs at once.
        with self._lock:
            for old in [key for key in list(self._tasks) if key.is_closed()]:
                del self._tasks[old]
                self._listening.pop(old, None)
            self._listening[loop] = asyncio.Event()
            self._tasks[loop] = loop.create_task(self._run(self._listening[loop]))

    def live(self) -> bool:
        """True while this loop's listener is subscribed: what is published now reaches it."""
        event = self._listening.get(asyncio.get_running_loop())
        return event is not None and event.is_set()

    async def listening(self, timeout: float = 5.0) -> bool:
        """Wait until this loop's listener is subscribed; False if there is none or not in time."""
        event = self._listening.get(asyncio.get_running_loop())
        if event is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop this loop's listener (a loop must not close with it running)."""
        loop = asyncio.get_running_loop()
        self._listening.pop(loop, None)
        task = self._tasks.pop(loop, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, listening_now: asyncio.Event) -> None:
        # Not a retry of one call, so neither tenacity nor redis-py's Retry: what fails is a
        # subscription that may have lived for hours, each loss must reset the owner (on_reset,
        # generation) before resubscribing, and the count of failures starts over once subscribed.
        # A Retry on the connection would be wrong here: redis-py would reconnect and resubscribe
        # inside get_message, and the messages published in the gap would be lost unnoticed.
        failures = 0
        me = asyncio.current_task()
        assert me is not None  # always run as a task (ensure)
        while True:
            pubsub = redis_client.client().pubsub()
            try:
                await pubsub.subscribe(redis_client.channel(self.channel))
                # Whatever was published while this loop was not subscribed is lost: start clean.
                self.generation += 1
                self.on_reset()
                listening_now.set()
                failures = 0
                while True:
                    # A bounded wait: redis-py's socket timeout would fail an unbounded one on a quiet channel.
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if me.cancelling():
                        # redis-py 8.1's read timeout (async_timeout) swallows a cancel that lands just
                        # as it expires: the read returns None and this loop would outlive its event
                        # loop's shutdown (asyncio.run waiting forever for this task).
                        raise asyncio.CancelledError
                    if message is not None and message.get("type") == "message":
                        self.on_message(message.get("data"))
            except asyncio.CancelledError:
                listening_now.clear()
                raise
            except Exception as exc:
                listening_now.clear()
                if me.cancelling():
                    raise asyncio.CancelledError from exc  # the same swallowed cancel, as a TimeoutError
                self.generation += 1
                failures += 1
                (logger.warning if failures == 1 else logger.debug)(
                    "%s subscriber lost Redis (%s in a row), retrying: %r", self.what, failures, exc
                )
                self.on_reset()
                await asyncio.sleep(min(0.2 * failures, 5.0))
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
