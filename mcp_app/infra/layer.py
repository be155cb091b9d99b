"""The Redis channel layer with pools that wait instead of failing, and reads that outlast BZPOPMIN.

channels_redis builds a plain redis-py ConnectionPool, which raises MaxConnectionsError once 100
connections are busy (1,000 streams leaving their groups at once). redis-py 8 also gives every
connection a 5 s socket timeout, the same as channels_redis's 5 s BZPOPMIN: an idle receive then
races the server's empty answer and fails with "Timeout reading" under load. Here each pool is a
BlockingConnectionPool and the socket timeout exceeds the BZPOPMIN timeout. An address may be a
Sentinel URL (redis_client.async_pool finds the primary).
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer

from mcp_app.infra import redis_client


class RedisChannelLayer(BaseRedisChannelLayer):
    """channels_redis's layer; hosts are `{"address": "redis://..."}` (extra keys go to the pool)."""

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        address = host.pop("address", None)
        if address is None:
            return super().create_pool(index)  # keyword hosts: channels_redis's own pool
        host.setdefault("socket_timeout", self.brpop_timeout + 10)
        return redis_client.async_pool(address, **host)
