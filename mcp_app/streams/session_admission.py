"""Who may open a new session: at most MCP_SESSIONS_PER_CLIENT per client, and the tenant's
`max_sessions` shared so that no one client keeps the others out (AMB-100..103).

A client is its OAuth user, else its OAuth client, else its address (the ASGI scope's `client`: the
socket peer, or X-Forwarded-For when Daphne runs with --proxy-headers, AMB-94).

With Redis, two sorted sets per tenant: `mcp:sessions:t:<tenant>` (members `<session id> <client>`)
and `mcp:sessions:c:<tenant>:<client>` (members: session ids), each scored by the earliest moment
(Redis's clock, ms) the session can have expired. One script admits: sessions whose score has passed
are looked at (still there: rescored to their real expiry; gone: dropped), only a few at a time
unless a count is at its cap, then all; past the tenant's cap the heaviest client's least recently
used session is ended if it holds two more than the asker; the new id goes in scored a reservation
ahead (its initialize is still running), so concurrent admissions on any process count it. A
session's deletion removes it from both sets in the same round trip (`forget`).

Without Redis (the database store, one process): the open rows plus this process's admissions in
flight, decided under a lock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from mcp_app.core.context import Caller
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.models import McpSession
from mcp_app.protocol import quotas

logger = logging.getLogger(__name__)

SESSION_KEY_PREFIX = "mcp:session:"  # the session store's keys (streams/sessions.py uses this one)
TENANT_PREFIX = "mcp:sessions:t:"
CLIENT_PREFIX = "mcp:sessions:c:"
# How long an admitted id counts before its session must exist (its initialize is running meanwhile);
# never past the first idle time, so that a score stays a lower bound of its session's expiry.
RESERVATION_SECONDS = 10
# Sessions whose score passed, looked at per admission when no cap forces a full count: keeps the
# sets near the number of live sessions at a bounded cost.
PRUNE_STEP = 4
# A refused client is told to come back when the soonest counted session expires, within these bounds.
MIN_RETRY_SECONDS = 1
MAX_RETRY_SECONDS = quotas.CAP_RETRY_SECONDS

CLIENT, SERVER = "client", "server"
MAX_CLIENT_KEY = 200  # McpSession.owner holds 255

# KEYS[1] the client's set, KEYS[2] the tenant's. ARGV: session key prefix, new id, client, client
# cap, tenant cap, reservation ms, client-set key prefix, sets' TTL seconds.
# Returns {0, 0, evicted id or ""} admitted, {1, ms until the soonest expiry} the client is at its
# cap, {2, ms} the tenant is and the asker may not take another client's session.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix = ARGV[1]

local function id_of(key, member)
  if key == KEYS[2] then return string.match(member, '^(%S+)') end
  return member
end

local function prune(key, limit)
  local stale
  if limit > 0 then
    stale = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, limit)
  else
    stale = redis.call('ZRANGEBYSCORE', key, '-inf', now)
  end
  for _, member in ipairs(stale) do
    local pttl = redis.call('PTTL', prefix .. id_of(key, member))
    if pttl == -2 then
      redis.call('ZREM', key, member)
    elseif pttl == -1 then
      redis.call('ZADD', key, 'XX', now + 86400000, member)
    else
      redis.call('ZADD', key, 'XX', now + pttl, member)
    end
  end
end

-- ms until the first of the set's sessions expires. A score is a lower bound of its session's expiry
-- (a reservation's, or one from before a refresh), so walking by score can stop early.
local function soonest(key)
  local members = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local best = nil
  for i = 1, #members, 2 do
    local bound = tonumber(members[i + 1]) - now
    if best ~= nil and bound >= best then break end
    local pttl = redis.call('PTTL', prefix .. id_of(key, members[i]))
    local left = pttl > 0 and pttl or bound
    if best == nil or left < best then best = left end
  end
  return math.max(0, best or 0)
end

local client_cap, tenant_cap = tonumber(ARGV[4]), tonumber(ARGV[5])
prune(KEYS[1], tonumber(ARGV[9]))
if client_cap > 0 and redis.call('ZCARD', KEYS[1]) >= client_cap then
  prune(KEYS[1], 0)
  if redis.call('ZCARD', KEYS[1]) >= client_cap then return {1, soonest(KEYS[1])} end
end
prune(KEYS[2], tonumber(ARGV[9]))
local evicted = ''
if tenant_cap > 0 and redis.call('ZCARD', KEYS[2]) >= tenant_cap then
  prune(KEYS[2], 0)
  if redis.call('ZCARD', KEYS[2]) >= tenant_cap then
    local counts, owners = {}, {}
    for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
      local id, owner = string.match(member, '^(%S+) (.*)$')
      counts[owner] = (counts[owner] or 0) + 1
      owners[#owners + 1] = {id, owner, member}
    end
    local heaviest, most = nil, -1
    for owner, n in pairs(counts) do
      if n > most then heaviest, most = owner, n end
    end
    if most < (counts[ARGV[3]] or 0) + 2 then return {2, soonest(KEYS[2])} end
    local victim, victim_ttl = nil, nil
    for _, entry in ipairs(owners) do
      if entry[2] == heaviest then
        local pttl = redis.call('PTTL', prefix .. entry[1])
        if pttl > 0 and (victim_ttl == nil or pttl < victim_ttl) then victim, victim_ttl = entry, pttl end
      end
    end
    if victim == nil then return {2, soonest(KEYS[2])} end
    redis.call('DEL', prefix .. victim[1])
    redis.call('ZREM', KEYS[2], victim[3])
    redis.call('ZREM', ARGV[7] .. heaviest, victim[1])
    evicted = victim[1]
  end
end
local reserved = now + tonumber(ARGV[6])
redis.call('ZADD', KEYS[1], reserved, ARGV[2])
redis.call('ZADD', KEYS[2], reserved, ARGV[2] .. ' ' .. ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[8]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[8]))
return {0, 0, evicted}
"""

_lock = threading.Lock()
# Without Redis: tenant id -> session id -> (client, monotonic deadline) of admissions in flight.
_pending: dict[int, dict[str, tuple[str, float]]] = {}


def client_key(caller: Caller, address: str | None) -> str:
    """The client a session is counted against: its OAuth user (ours, or the tenant's identity
    provider's), else its OAuth client, else its address."""
    if caller.user_id is not None:
        return f"user:{caller.user_id}"
    if caller.subject:
        return f"subject:{caller.subject}"[:MAX_CLIENT_KEY]
    key = f"client:{caller.client_id}" if caller.client_id else f"address:{address or 'unknown'}"
    return key[:MAX_CLIENT_KEY]  # a client id (a CIMD URL) or a forwarded address may be long


def tenant_key(tenant_id: int) -> str:
    return f"{TENANT_PREFIX}{tenant_id}"


def client_set_prefix(tenant_id: int) -> str:
    return f"{CLIENT_PREFIX}{tenant_id}:"


def reservation_seconds() -> int:
    return min(RESERVATION_SECONDS, settings.MCP_SESSION_FIRST_IDLE_SECONDS)


def retry_seconds(ms: float) -> int:
    return max(MIN_RETRY_SECONDS, min(MAX_RETRY_SECONDS, math.ceil(ms / 1000)))


class SessionsRefused(Exception):
    """A new session would pass the client's or the tenant's cap; counted for /metrics when raised."""

    def __init__(self, scope: str, limit: int, retry_after: int) -> None:
        self.scope = scope  # CLIENT | SERVER
        self.limit = limit
        self.retry_after = retry_after
        if scope == CLIENT:
            self.message = (
                f"You have this server's limit of {limit} open sessions per client. End one (DELETE "
                f"with its Mcp-Session-Id) or retry in {retry_after} s."
            )
        else:
            self.message = (
                f"This server has its limit of {limit} open sessions. Close one (DELETE with its "
                f"Mcp-Session-Id) or retry in {retry_after} s."
            )
        super().__init__(self.message)
        quotas.count_refusal("sessions_per_client" if scope == CLIENT else "sessions")


@dataclass(frozen=True)
class Admitted:
    evicted: str | None  # another client's session ended to make room (AMB-101)


async def admit(tenant: TenantInfo, session_id: str, owner: str) -> Admitted:
    """Count `session_id` as `owner`'s new session, or raise SessionsRefused (counting nothing)."""
    client_cap = settings.MCP_SESSIONS_PER_CLIENT
    if redis_client.enabled():
        client_set = client_set_prefix(tenant.id) + owner
        try:
            reply = await redis_client.client().eval(
                _ADMIT,
                2,
                client_set,
                tenant_key(tenant.id),
                SESSION_KEY_PREFIX,
                session_id,
                owner,
                client_cap,
                tenant.max_sessions,
                reservation_seconds() * 1000,
                client_set_prefix(tenant.id),
                settings.MCP_SESSION_IDLE_SECONDS + RESERVATION_SECONDS,
                PRUNE_STEP,
            )
        except redis_client.UNAVAILABLE:
            # As the quotas do: an outage must not become a refusal; the session's own write then
            # fails in words (AMB-83).
            logger.warning("session admission: Redis is not answering; admitting", exc_info=True)
            return Admitted(None)
        status, ms = int(reply[0]), float(reply[1])
        if status == 1:
            raise SessionsRefused(CLIENT, client_cap, retry_seconds(ms))
        if status == 2:
            raise SessionsRefused(SERVER, tenant.max_sessions, retry_seconds(ms))
        evicted = reply[2]
        evicted = evicted.decode() if isinstance(evicted, bytes) else evicted
        return Admitted(evicted or None)
    return await database_sync_to_async(_admit_rows)(
        tenant.id, tenant.max_sessions, client_cap, session_id, owner
    )


def forget(pipe: Any, tenant_id: int, session_id: str, owner: str) -> None:
    """Queue, on the pipeline that deletes a session, its removal from the counts (Redis)."""
    if owner:
        pipe.zrem(client_set_prefix(tenant_id) + owner, session_id)
        pipe.zrem(tenant_key(tenant_id), f"{session_id} {owner}")


def settled(tenant_id: int, session_id: str) -> None:
    """Without Redis: the admission's session row is written (or its initialize failed)."""
    with _lock:
        pending = _pending.get(tenant_id)
        if pending is not None:
            pending.pop(session_id, None)
            if not pending:
                del _pending[tenant_id]


def _expiry(last_seen: float, created: float, idle: float, first_idle: float) -> float:
    return created + first_idle if last_seen < created else last_seen + idle


def _admit_rows(tenant_id: int, tenant_cap: int, client_cap: int, session_id: str, owner: str) -> Admitted:
    idle = float(settings.MCP_SESSION_IDLE_SECONDS)
    first_idle = float(min(settings.MCP_SESSION_FIRST_IDLE_SECONDS, settings.MCP_SESSION_IDLE_SECONDS))
    with _lock:
        now_mono = time.monotonic()
        pending = _pending.setdefault(tenant_id, {})
        for sid in [s for s, (_o, deadline) in pending.items() if deadline < now_mono]:
            del pending[sid]
        rows = McpSession.objects.filter(tenant_id=tenant_id).open()
        if not tenant_cap:
            rows = rows.filter(owner=owner)
        now = timezone.now().timestamp()
        # (session id, owner, expires at): open rows, then admissions whose row is not written yet.
        counted = [
            (sid, row_owner, _expiry(seen.timestamp(), made.timestamp(), idle, first_idle))
            for sid, row_owner, seen, made in rows.values_list("id", "owner", "last_seen_at", "created_at")
        ]
        known = {sid for sid, _o, _e in counted}
        counted += [
            (sid, row_owner, now + reservation_seconds())
            for sid, (row_owner, _d) in pending.items()
            if sid not in known
        ]
        mine = [expires for _s, row_owner, expires in counted if row_owner == owner]
        if client_cap and len(mine) >= client_cap:
            raise SessionsRefused(CLIENT, client_cap, retry_seconds((min(mine) - now) * 1000))
        evicted = None
        if tenant_cap and len(counted) >= tenant_cap:
            per_client: dict[str, int] = {}
            for _s, row_owner, _e in counted:
                per_client[row_owner] = per_client.get(row_owner, 0) + 1
            heaviest = max(per_client, key=lambda o: per_client[o])
            soonest = min(expires for _s, _o, expires in counted)
            candidates = [
                (expires, sid)
                for sid, row_owner, expires in counted
                if row_owner == heaviest and sid in known
            ]
            if per_client[heaviest] < len(mine) + 2 or not candidates:
                raise SessionsRefused(SERVER, tenant_cap, retry_seconds((soonest - now) * 1000))
            evicted = min(candidates)[1]
            McpSession.objects.filter(pk=evicted).delete()
        pending[session_id] = (owner, now_mono + reservation_seconds())
        return Admitted(evicted)


def reset() -> None:
    """Forget this process's admissions in flight (tests)."""
    with _lock:
        _pending.clear()
