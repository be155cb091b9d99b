"""The one standalone GET stream a session may hold at a time (HT-31: one message, one stream).

The slot holds "<stream id> <connection>". A GET resuming the very stream that holds the slot (its
Last-Event-ID names it) takes the slot over instead of getting 409: its client is reconnecting, and
the connection it left is dead (its process was killed: nothing will release the slot before its TTL)
or soon will be. The connection taken over is told to end (AMB-88), so one stream never has two
writers storing the same message twice.
"""

from __future__ import annotations

import secrets

from django.conf import settings

from mcp_app.infra import redis_client

LOCK_PREFIX = "mcp:getstream:"

# KEYS[1] the slot; ARGV: holder, stream id, resuming ("1"/"0"), ttl. 0 refused, 1 taken, 2 taken over.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and not (ARGV[3] == '1' and string.sub(holder, 1, #ARGV[2] + 1) == ARGV[2] .. ' ') then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[4]))
if holder then return 2 end
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_local: dict[str, str] = {}

REFUSED, TAKEN, TAKEN_OVER = 0, 1, 2


def _ttl() -> int:
    # Refreshed at every keep-alive; a stream whose process died frees the slot after a few misses.
    return max(3 * settings.MCP_SSE_KEEPALIVE_SECONDS, 10)


def new_holder(stream_id: str) -> str:
    return f"{stream_id} {secrets.token_hex(6)}"


async def acquire(session_id: str, holder: str, resuming: bool = False) -> int:
    """Claim the session's standalone stream for `holder` (new_holder): REFUSED, TAKEN or TAKEN_OVER."""
    stream_id = holder.partition(" ")[0]
    if redis_client.enabled():
        return int(
            await redis_client.client().eval(
                _ACQUIRE, 1, LOCK_PREFIX + session_id, holder, stream_id, "1" if resuming else "0", _ttl()
            )
        )
    current = _local.get(session_id)
    if current is not None and not (resuming and current.partition(" ")[0] == stream_id):
        return REFUSED
    _local[session_id] = holder
    return TAKEN if current is None else TAKEN_OVER


async def refresh(session_id: str) -> None:
    if redis_client.enabled():
        await redis_client.client().expire(LOCK_PREFIX + session_id, _ttl())


async def release(session_id: str, holder: str) -> None:
    if redis_client.enabled():
        await redis_client.client().eval(_RELEASE, 1, LOCK_PREFIX + session_id, holder)
    elif _local.get(session_id) == holder:
        del _local[session_id]
