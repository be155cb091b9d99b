"""Redis clients: one asyncio client per event loop (a connection belongs to the loop that opened it).

Every pool is a BlockingConnectionPool: when all its connections are busy (a tenant-wide event
reaching 1,000 open streams at once) a caller waits for a free one instead of failing with
MaxConnectionsError, which redis-py's default pool raises at 100 connections.

REDIS_URL may name Redis behind Sentinel (lib/redis_url.py, AMB-370): the pools then ask the sentinels
for the primary on every new connection, and drop their idle connections when the primary changes.
Every Redis client of the platform takes its pool from here (the cache through `CachePool`, the
channel layer through infra/layer.py), so one URL moves them all.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from lib import redis_url

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


# How long a question to a sentinel may take: a sentinel that is gone is passed over for the next one.
SENTINEL_SECONDS = 1.0


class SentinelConnection(redis.sentinel.SentinelManagedConnection):
    """A connection that asks the sentinels again whenever it reconnects.

    redis-py 8.2 reconnects a connection closed under a command (the retry below) in
    send_packed_command through connect_check_health, which dials the address the connection last
    had: the failed primary. Only `connect` asks the sentinels.
    """

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            self.connect()
        super().send_packed_command(command, check_health)


class AsyncSentinelConnection(redis.asyncio.sentinel.SentinelManagedConnection):
    """The same for asyncio clients."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()
        await super().send_packed_command(command, check_health)


class SentinelBlockingConnectionPool(redis.sentinel.SentinelConnectionPool, redis.BlockingConnectionPool):
    """redis-py's Sentinel pool (it finds the primary) that waits for a free connection like ours."""


class AsyncSentinelBlockingConnectionPool(
    redis.asyncio.sentinel.SentinelConnectionPool, redis.asyncio.BlockingConnectionPool
):
    """The same for asyncio clients."""


def _sentinel_options(target: redis_url.RedisTarget) -> dict[str, Any]:
    return {
        "sentinel_kwargs": {
            **(target.sentinel_kwargs() or {}),
            "socket_timeout": SENTINEL_SECONDS,
            "socket_connect_timeout": SENTINEL_SECONDS,
        }
    }


def _defaults(options: dict[str, Any]) -> None:
    options.setdefault("max_connections", MAX_CONNECTIONS)
    options.setdefault("timeout", POOL_TIMEOUT)
    # A command whose connection was closed under it (the primary failed over, Sentinel's CLIENT KILL,
    # a restart) runs once more on a new connection, which asks the sentinels again: without it the
    # first command on each pooled connection after a failover fails (a background job, a session).
    options.setdefault("retry_on_error", [redis.exceptions.ConnectionError])


def sync_pool(url: str, **options: Any) -> Any:
    """A blocking pool for `url`, plain or Sentinel; `options` go to every connection."""
    _defaults(options)
    target = redis_url.parse(url)
    if not target.sentinel:
        return redis.BlockingConnectionPool.from_url(url, **options)
    manager = redis.sentinel.Sentinel(list(target.sentinels), **_sentinel_options(target))
    options.setdefault("connection_class", SentinelConnection)
    return SentinelBlockingConnectionPool(target.service, manager, **target.master_kwargs(), **options)


def async_pool(url: str, **options: Any) -> Any:
    """The asyncio pool for `url`, plain or Sentinel; bound to the loop that first uses it."""
    _defaults(options)
    target = redis_url.parse(url)
    if not target.sentinel:
        return redis.asyncio.BlockingConnectionPool.from_url(url, **options)
    manager = redis.asyncio.sentinel.Sentinel(list(target.sentinels), **_sentinel_options(target))
    options.setdefault("connection_class", AsyncSentinelConnection)
    return AsyncSentinelBlockingConnectionPool(target.service, manager, **target.master_kwargs(), **options)


class CachePool(redis.BlockingConnectionPool):
    """The pool class CACHES names: Django's Redis cache builds its pools with `from_url`."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Any:
        return sync_pool(url, **options)


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def channel(name: str) -> str:
    """A pub/sub channel of this deployment's: `name` with REDIS_URL's database number.

    Keys live in one database, but pub/sub channels are shared by every database of a Redis server:
    two deployments on one server (a test run beside a benchmark, staging beside production) would
    otherwise hear each other's change tokens and evictions for tenants that share an id.
    """
    return f"{name}:db{redis_url.parse(_url()).db}"


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
        pool = async_pool(url, decode_responses=True)
        found = clients[url] = redis.asyncio.Redis(connection_pool=pool)
    return found


def sync_client() -> Any:
    """Return the process's synchronous client for REDIS_URL (signal handlers, management commands)."""
    url = _url()
    found = _sync_clients.get(url)
    if found is None:
        pool = sync_pool(url, decode_responses=True)
        found = _sync_clients[url] = redis.Redis(connection_pool=pool)
    return found
