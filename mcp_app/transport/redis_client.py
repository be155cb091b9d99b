"""One asyncio Redis client per event loop (a connection belongs to the loop that opened it)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from django.conf import settings

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def client() -> Any:
    """Return this loop's redis.asyncio client (decoded strings)."""
    import redis.asyncio

    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        found = redis.asyncio.Redis.from_url(settings.REDIS_URL, decode_responses=True)
        _clients[loop] = found
    return found
