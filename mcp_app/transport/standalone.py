"""The one standalone GET stream a session may hold at a time (HT-31: one message, one stream)."""

from __future__ import annotations

from django.conf import settings

from mcp_app.infra import redis_client

LOCK_PREFIX = "mcp:getstream:"

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_local: dict[str, str] = {}


def _ttl() -> int:
    # Refreshed at every keep-alive; a stream whose process died frees the slot after a few misses.
    return max(3 * settings.MCP_SSE_KEEPALIVE_SECONDS, 10)


async def acquire(session_id: str, stream_id: str) -> bool:
    """Claim the session's standalone stream; False when another connection holds it."""
    if redis_client.enabled():
        return bool(await redis_client.client().set(LOCK_PREFIX + session_id, stream_id, nx=True, ex=_ttl()))
    if session_id in _local:
        return False
    _local[session_id] = stream_id
    return True


async def refresh(session_id: str) -> None:
    if redis_client.enabled():
        await redis_client.client().expire(LOCK_PREFIX + session_id, _ttl())


async def release(session_id: str, stream_id: str) -> None:
    if redis_client.enabled():
        await redis_client.client().eval(_RELEASE, 1, LOCK_PREFIX + session_id, stream_id)
    elif _local.get(session_id) == stream_id:
        del _local[session_id]
