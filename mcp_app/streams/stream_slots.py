"""Caps on open SSE streams: per legacy session and per tenant (`max_streams_per_session`, `max_streams`).

A stream is an SSE response held open: a session's GET stream (fresh or resumed, either kind), a POST
answered as SSE (both eras), a 2026-07-28 subscriptions/listen, a 2024-11-05 /sse stream. Each takes a
slot while its response is open and gives it back when the response ends, whatever ends it (AMB-87).

With Redis the slots are leases in two sorted sets, `mcp:streams:t:<tenant>` and `mcp:streams:s:<session>`
(member: the slot's id, score: when its lease runs out, in Redis's own clock), taken by one script
that drops run-out leases, compares the counts with the caps and adds the slot to both, so two
processes never both take the last one. A holder renews its lease every LEASE_SECONDS / 3; a
process killed with its streams open stops renewing, and its slots free themselves within
LEASE_SECONDS. Without Redis the count is this process's own (sets in memory), exact for one
process. Nothing is counted for a tenant with neither cap: a stream there costs no round trip.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field

from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.protocol import quotas

logger = logging.getLogger(__name__)

TENANT_PREFIX = "mcp:streams:t:"
SESSION_PREFIX = "mcp:streams:s:"
# How long a lease lasts without renewal: how soon a killed process's streams stop counting.
LEASE_SECONDS = 15
# How long a refused client is told to wait.
RETRY_SECONDS = 5

# KEYS[1] the tenant's set, KEYS[2] the session's (optional). ARGV: lease seconds, tenant cap,
# session cap, member. Returns 0 (taken), 1 (the tenant is at its cap), 2 (the session is).
_ACQUIRE = """
local now = tonumber(redis.call('TIME')[1])
local expires = now + tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local cap = tonumber(ARGV[i + 1])
  if cap > 0 and redis.call('ZCARD', key) >= cap then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, expires, ARGV[4])
  redis.call('EXPIRE', key, tonumber(ARGV[1]) + 1)
end
return 0
"""
# Renew: the same keys and member; ARGV[1] the lease seconds.
_RENEW = """
local expires = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', expires, ARGV[2])
  redis.call('EXPIRE', key, tonumber(ARGV[1]) + 1)
end
return 0
"""

_local: dict[str, set[str]] = {}


class StreamCapReached(Exception):
    """A new stream would pass the tenant's or the session's cap; counted for /metrics when raised."""

    def __init__(self, scope: str, limit: int) -> None:
        self.scope = scope  # "server" | "session"
        self.limit = limit
        owner = "This server" if scope == "server" else "This session"
        self.message = (
            f"{owner} has its limit of {limit} open streams (SSE) at once. Close one (or let a "
            f"long answer finish) and retry in {RETRY_SECONDS} s."
        )
        super().__init__(self.message)
        quotas.count_refusal("streams" if scope == "server" else "streams_per_session")


@dataclass
class Slot:
    """One open stream's place in its tenant's (and session's) count."""

    member: str
    keys: list[str]
    renewer: asyncio.Task | None = field(default=None, repr=False)


def capped(tenant: TenantInfo, session_id: str | None) -> bool:
    return bool(tenant.max_streams or (session_id and tenant.max_streams_per_session))


async def acquire(tenant: TenantInfo, session_id: str | None) -> Slot | None:
    """Take a slot for a new stream; None when the tenant caps no stream. Raises StreamCapReached."""
    if not capped(tenant, session_id):
        return None
    keys = [f"{TENANT_PREFIX}{tenant.id}"]
    caps = [tenant.max_streams]
    if session_id:
        keys.append(f"{SESSION_PREFIX}{session_id}")
        caps.append(tenant.max_streams_per_session)
    member = secrets.token_hex(8)
    if redis_client.enabled():
        args = [LEASE_SECONDS, caps[0], caps[1] if len(caps) > 1 else 0, member]
        over = int(await redis_client.client().eval(_ACQUIRE, len(keys), *keys, *args))
    else:
        full = [bool(cap) and len(_local.get(key, ())) >= cap for key, cap in zip(keys, caps, strict=True)]
        over = full.index(True) + 1 if any(full) else 0
        if not over:
            for key in keys:
                _local.setdefault(key, set()).add(member)
    if over:
        raise StreamCapReached("server" if over == 1 else "session", caps[over - 1])
    slot = Slot(member, keys)
    if redis_client.enabled():
        slot.renewer = asyncio.get_running_loop().create_task(_renew(slot))
    return slot


async def _renew(slot: Slot) -> None:
    while True:
        await asyncio.sleep(LEASE_SECONDS / 3)
        try:
            await redis_client.client().eval(_RENEW, len(slot.keys), *slot.keys, LEASE_SECONDS, slot.member)
        except Exception:  # the next renewal may succeed; until the lease runs out the slot stands
            logger.warning("could not renew a stream's slot", exc_info=True)


async def release(slot: Slot | None) -> None:
    """Give the slot back (the stream's response has ended); a failure only delays it to the lease's end."""
    if slot is None:
        return
    if slot.renewer is not None:
        slot.renewer.cancel()
    if not redis_client.enabled():
        for key in slot.keys:
            members = _local.get(key)
            if members is not None:
                members.discard(slot.member)
                if not members:
                    del _local[key]
        return
    try:
        async with redis_client.client().pipeline(transaction=False) as pipe:
            for key in slot.keys:
                pipe.zrem(key, slot.member)
            await pipe.execute()
    except Exception:
        logger.warning("could not free a stream's slot; its lease frees it", exc_info=True)


def reset() -> None:
    """Forget this process's slots (tests)."""
    _local.clear()
