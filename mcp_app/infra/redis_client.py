"""Redis clients: one asyncio client per event loop (a connection belongs to the loop that opened it).

Every pool is a BlockingConnectionPool: when all its connections are busy (a tenant-wide event
reaching 1,000 open streams at once) a caller waits for a free one instead of failing with
MaxConnectionsError, which redis-py's default pool raises at 100 connections.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# What a Redis outage raises (a refused, dropped or timed-out connection): callers answer these with a
# clear "retry shortly" instead of an internal error; the pools reconnect by themselves once it is back.
UNAVAILABLE: tuple[type[Exception], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
UNAVAILABLE_MESSAGE = (
    "A service this server needs (Redis) is not answering; nothing was kept. Retry in a few seconds."
)
RETRY_SECONDS = 5

# Connections per pool, and how long a caller waits for a free one before giving up.
MAX_CONNECTIONS: int = getattr(settings, "MCP_REDIS_MAX_CONNECTIONS", 64)
POOL_TIMEOUT: float = getattr(settings, "MCP_REDIS_POOL_TIMEOUT", 20.0)

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = weakref.WeakKeyDictionary()
_sync_clients: dict[str, Any] = {}


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def channel(name: str) -> str:
    """A pub/sub channel of this deployment's: `name` with REDIS_URL's database number.

    Keys live in one database, but pub/sub channels are shared by every database of a Redis server:
    two deployments on one server (a test run beside a benchmark, staging beside production) would
    otherwise hear each other's change tokens and evictions for tenants that share an id.
    """
    return f"{name}:db{redis.connection.parse_url(settings.REDIS_URL).get('db', 0)}"


def _url() -> str:
    if settings.REDIS_URL is None:
        raise ImproperlyConfigured("REDIS_URL is not set: this needs Redis.")
    return settings.REDIS_URL


def client() -> Any:
    """Return this loop's redis.asyncio client for REDIS_URL (decoded strings)."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    url = _url()
    found = clients.get(url)
    if found is None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=POOL_TIMEOUT, decode_responses=True
        )
        found = clients[url] = redis.asyncio.Redis(connection_pool=pool)
    return found


def sync_client() -> Any:
    """Return the process's synchronous client for REDIS_URL (signal handlers, management commands)."""
    url = _url()
    found = _sync_clients.get(url)
    if found is None:
        pool = redis.BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=POOL_TIMEOUT, decode_responses=True
        )
        found = _sync_clients[url] = redis.Redis(connection_pool=pool)
    return found
