"""The one in-process cache: expiry, a size bound, eviction across processes, and the overlap rule (AMB-300).

A `Cache` keeps values in this process's memory (cachetools' TLRUCache: each entry its own expiry, the
least recently used dropped past `maxsize`), in `pools` kept apart so a flood of one kind (refused
tokens) cannot push out the other (accepted ones). It is safe to use from several threads (Django's
signal handlers evict from a sync thread).

The overlap rule: a reader takes `mark()` before it reads the source and hands it to `put`, which keeps
nothing if any eviction or clearing happened since, as the read may predate the change it missed.

Eviction across processes: with Redis, `evict_everywhere` drops an entry here at once and, after the
transaction commits, publishes it on the one channel `mcp:cache:evict` as `{"cache": name, "key": key}`
(or `"field"`/`"value"`: every entry whose value has that attribute equal to it). Each serving event
loop where a cache called `listen` runs one subscriber (infra/pubsub.py) for every cache; whenever it
(re)subscribes or loses Redis, every cache that listens is cleared, since a message sent meanwhile is lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from cachetools import TLRUCache
from django.db import transaction

from mcp_app.infra import pubsub, redis_client

logger = logging.getLogger(__name__)

CHANNEL = "mcp:cache:evict"


def _monotonic() -> float:
    return time.monotonic()  # looked up at each call, so a test may move time.monotonic


class Cache:
    """A named, bounded map of entries that expire; see the module's docstring."""

    def __init__(
        self, name: str, maxsize: int, pools: int = 1, timer: Callable[[], float] = _monotonic
    ) -> None:
        self.name = name
        self._pools = [TLRUCache(maxsize, _expires, timer=timer) for _ in range(pools)]
        self._lock = threading.Lock()
        self.generation = 0  # evictions and clearings so far: what `mark` returns
        # The event loops whose subscriber it relies on (`listen`): their (re)subscriptions clear it.
        self._listens: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        _caches[name] = self

    def mark(self) -> int:
        """Take before reading the source; pass to `put`."""
        return self.generation

    def get(self, key: Hashable) -> Any:
        """The live value under `key`, or None."""
        with self._lock:
            for pool in self._pools:
                try:
                    return pool[key][0]  # one clock read (`pool.get` takes two)
                except KeyError:
                    continue
        return None

    def put(self, key: Hashable, value: Any, mark: int, seconds: float, pool: int = 0) -> bool:
        """Keep `value` for `seconds` in `pool`, unless something was evicted since `mark` (then False)."""
        with self._lock:
            if mark != self.generation or seconds <= 0:
                return False
            for index, other in enumerate(self._pools):
                if index != pool:
                    other.pop(key, None)
            self._pools[pool][key] = (value, seconds)
            return True

    def evict(self, key: Hashable) -> None:
        """Drop `key` in this process."""
        with self._lock:
            self.generation += 1
            for pool in self._pools:
                pool.pop(key, None)

    def evict_by(self, field: str, value: Any) -> None:
        """Drop, in this process, every entry whose value's `field` is `value`."""
        with self._lock:
            self.generation += 1
            for pool in self._pools:
                for key in [k for k, entry in list(pool.items()) if getattr(entry[0], field, None) == value]:
                    pool.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            for pool in self._pools:
                pool.clear()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(pool) for pool in self._pools)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return any(key in pool for pool in self._pools)

    # --- across processes ---------------------------------------------------------------------------

    def listen(self) -> None:
        """Run this event loop's eviction subscriber (Redis only); from now on each (re)subscription clears
        this cache, as what was published while this loop was not subscribed is lost."""
        if redis_client.enabled():
            self._listens.add(asyncio.get_running_loop())
            _subscriber.ensure()

    def message(self, key: Hashable) -> tuple[str, str]:
        """The (channel, data) that evicts `key` in every process: for a caller's own Redis pipeline."""
        return redis_client.channel(CHANNEL), json.dumps({"cache": self.name, "key": key})

    def evict_everywhere(self, key: Hashable) -> None:
        """Drop `key` here at once and, once the transaction commits, in every other process."""
        self.evict(key)
        _publish_after_commit({"cache": self.name, "key": key})

    def evict_by_everywhere(self, field: str, value: Any) -> None:
        """`evict_by` here at once and, once the transaction commits, in every other process."""
        self.evict_by(field, value)
        _publish_after_commit({"cache": self.name, "field": field, "value": value})


def _expires(_key: Any, entry: tuple[Any, float], now: float) -> float:
    return now + entry[1]


_caches: weakref.WeakValueDictionary[str, Cache] = weakref.WeakValueDictionary()


def _publish_after_commit(message: dict[str, Any]) -> None:
    """Tell the other processes once the change is committed (before, they could re-read the old row)."""
    if not redis_client.enabled():
        return
    data = json.dumps(message)

    def send() -> None:
        try:
            redis_client.sync_client().publish(redis_client.channel(CHANNEL), data)
        except Exception:  # the others still drop the entry when it expires
            logger.warning("could not publish a cache eviction of %s", message.get("cache"), exc_info=True)

    transaction.on_commit(send)


def _hashable(key: Any) -> Hashable | None:
    """A key as JSON gave it back: lists become tuples (a tuple key was sent as a list)."""
    if isinstance(key, list):
        parts = tuple(_hashable(part) for part in key)
        return None if any(part is None for part in parts) else parts
    return key if isinstance(key, str | int | float | bool) else None


def _on_message(raw: Any) -> None:
    try:
        message = json.loads(raw)
    except (TypeError, ValueError):
        return
    if not isinstance(message, dict):
        return
    cache = _caches.get(name) if isinstance(name := message.get("cache"), str) else None
    if cache is None:
        return
    if "key" in message:
        key = _hashable(message["key"])
        if key is not None:
            cache.evict(key)
    elif isinstance(message.get("field"), str) and _hashable(message.get("value")) is not None:
        cache.evict_by(message["field"], message["value"])


def _on_reset() -> None:
    loop = asyncio.get_running_loop()  # the subscriber's
    for cache in list(_caches.values()):
        if loop in cache._listens:
            cache.clear()


_subscriber = pubsub.Subscriber(CHANNEL, _on_message, _on_reset, "cache eviction")


def live() -> bool:
    """True while this loop's subscriber is subscribed: an eviction published now reaches this process."""
    return _subscriber.live()


async def listening(timeout: float = 5.0) -> bool:
    """Wait until this loop's subscriber listens; False if there is none or it did not within `timeout`."""
    return await _subscriber.listening(timeout)


async def stop_listening() -> None:
    """Stop this loop's subscriber (a loop must not close with it running)."""
    await _subscriber.stop()
