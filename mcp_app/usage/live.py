"""What is open right now per tenant: sessions (from the session store) and listening streams.

Sessions: with Redis, each session's creation also adds its id to a per-tenant set (in the same
pipeline as the session itself, so no extra round trip); counting walks the set in one script that
drops ids whose session expired or was deleted. Without Redis, the database's open session rows
are counted.

Listeners (subscriptions/listen streams): each process counts its own in memory; with Redis, every
flush publishes them under the process's name with the time, and a reader adds the fresh ones, so
a process that died stops counting within LISTENER_STALE_FLUSHES flushes (AMB-67).
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from mcp_app.infra import redis_client
from mcp_app.models import McpSession
from mcp_app.usage.recorder import Recorder, recorder

SESSION_KEY_PREFIX = "mcp:session:"  # the session store's (mcp_app.streams.session_admission)
SESSIONS_SET = "mcp:usage:sessions:"
LISTENERS_HASH = "mcp:usage:listeners:"
LISTENER_STALE_FLUSHES = 3

# Count the members of KEYS[1] whose session key still exists; forget the others.
_COUNT_SESSIONS = """
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then n = n + 1 else redis.call('SREM', KEYS[1], id) end
end
return n
"""


def sessions_set_key(tenant_id: int) -> str:
    return f"{SESSIONS_SET}{tenant_id}"


def add_session(pipe: Any, tenant_id: int, session_id: str) -> None:
    """Queue, on the session store's pipeline, the set membership that makes the session countable."""
    key = sessions_set_key(tenant_id)
    pipe.sadd(key, session_id)
    pipe.expire(key, settings.MCP_SESSION_IDLE_SECONDS)


def active_sessions(tenant_ids: list[int]) -> dict[int, int]:
    """Open sessions (both legacy transports) per tenant."""
    if not tenant_ids:
        return {}
    if redis_client.enabled():
        client = redis_client.sync_client()
        script = client.register_script(_COUNT_SESSIONS)
        with client.pipeline(transaction=False) as pipe:
            for tenant_id in tenant_ids:
                script(keys=[sessions_set_key(tenant_id)], args=[SESSION_KEY_PREFIX], client=pipe)
            counts = pipe.execute()
        return {tenant_id: int(n) for tenant_id, n in zip(tenant_ids, counts, strict=True)}
    found = dict.fromkeys(tenant_ids, 0)
    rows = McpSession.objects.filter(tenant_id__in=tenant_ids).open()
    for tenant_id in rows.values_list("tenant_id", flat=True):
        found[tenant_id] += 1
    return found


def _stale_after() -> float:
    return max(float(settings.MCP_USAGE_FLUSH_SECONDS), 1.0) * LISTENER_STALE_FLUSHES + 5.0


def publish_listeners(source: Recorder, published: set[int]) -> set[int]:
    """Write this process's open listeners per tenant to Redis; return the tenants now published."""
    counts = dict(source.listeners)
    if not counts and not published:
        return set()
    now = time.time()
    with redis_client.sync_client().pipeline(transaction=False) as pipe:
        for tenant_id, n in counts.items():
            key = f"{LISTENERS_HASH}{tenant_id}"
            pipe.hset(key, source.process_id, f"{n} {now:.3f}")
            pipe.expire(key, int(_stale_after()) + 1)
        for tenant_id in published - set(counts):
            pipe.hdel(f"{LISTENERS_HASH}{tenant_id}", source.process_id)
        pipe.execute()
    return set(counts)


def active_listeners(tenant_ids: list[int], source: Recorder | None = None) -> dict[int, int]:
    """Open subscriptions/listen streams per tenant: every process's (Redis), else this one's."""
    local = source or recorder()
    if not redis_client.enabled():
        return {tenant_id: local.listeners.get(tenant_id, 0) for tenant_id in tenant_ids}
    client = redis_client.sync_client()
    with client.pipeline(transaction=False) as pipe:
        for tenant_id in tenant_ids:
            pipe.hgetall(f"{LISTENERS_HASH}{tenant_id}")
        found = pipe.execute()
    fresh_since = time.time() - _stale_after()
    result: dict[int, int] = {}
    for tenant_id, fields in zip(tenant_ids, found, strict=True):
        total = 0
        stale = []
        for process, value in fields.items():
            count, _, at = value.partition(" ")
            if float(at or 0) >= fresh_since:
                total += int(count)
            else:
                stale.append(process)
        if stale:
            client.hdel(f"{LISTENERS_HASH}{tenant_id}", *stale)
        result[tenant_id] = total
    return result
