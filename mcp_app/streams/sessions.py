"""Session store: Redis when REDIS_URL is set (any process serves any session), else the database.

The hot path reads a session from this process's memory: with Redis, a session read by a GETEX
(which also renews its idle TTL) is served from memory for MCP_SESSION_CACHE_SECONDS, and every update
or end of a session is published on a channel each process listens to, which drops it from memory
(AMB-189); without Redis, a cache in front of the database. A new session is stored
with the shorter MCP_SESSION_FIRST_IDLE_SECONDS until its first later request (AMB-104), and admitted
first by session_admission (caps per client and per tenant, AMB-100..103).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from mcp_app.core.context import SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.infra import cache as infra_cache
from mcp_app.infra import notify, redis_client
from mcp_app.infra.cache import Cache
from mcp_app.models import McpSession
from mcp_app.streams import inflight, session_admission
from mcp_app.usage import live as usage_live

logger = logging.getLogger(__name__)

KEY_PREFIX = session_admission.SESSION_KEY_PREFIX
# Legacy (2024-11-05 HTTP+SSE) sessions carry this prefix; token_urlsafe never produces ".".
LEGACY_PREFIX = "L."
# The database store writes last_seen_at at most this often per session (reads are cached).
TOUCH_INTERVAL_SECONDS = 60.0
# How often creating a session also forgets idle ones (cache entries and database rows).
SWEEP_INTERVAL_SECONDS = 60.0


def new_session_id(legacy: bool = False) -> str:
    """Return a fresh, unguessable session id of visible ASCII only (HT-37)."""
    token = secrets.token_urlsafe(32)
    return LEGACY_PREFIX + token if legacy else token


def is_legacy(session_id: str) -> bool:
    return session_id.startswith(LEGACY_PREFIX)


# Letters and digits (str.isalnum's, which \w adds "_" to), "-", "_" and ".": one regex match per
# request instead of a generator step per character (the id was checked twice a request, ~170 calls).
_SESSION_ID = re.compile(r"[\w.-]{1,64}")


def valid_session_id(value: str) -> bool:
    """Refuse junk before it reaches a store key or a channel-layer group name."""
    return _SESSION_ID.fullmatch(value) is not None


# The most sessions one process keeps in memory; past it the least recently read is forgotten first.
CACHE_MAX_ENTRIES = 20_000
# Sessions this process read from Redis, each kept until its read is _memory_seconds() old or a process
# publishes a change of it (AMB-189). Used only while this loop is subscribed to the evictions.
_memory = Cache("sessions", CACHE_MAX_ENTRIES)


def _memory_seconds() -> float:
    # Below the idle TTL, so a session used only here still has its TTL renewed in Redis in time.
    return min(float(settings.MCP_SESSION_CACHE_SECONDS), settings.MCP_SESSION_IDLE_SECONDS / 4)


def _remembered(session_id: str) -> SessionState | None:
    if settings.MCP_SESSION_CACHE_SECONDS <= 0:
        return None
    _memory.listen()
    return _memory.get(session_id) if infra_cache.live() else None


def _remember(raw: Any, mark: int) -> SessionState | None:
    """The session a GETEX read; kept in memory unless a change was heard since `mark`."""
    if raw is None:
        return None
    state = SessionState.from_dict(json.loads(raw))
    if settings.MCP_SESSION_CACHE_SECONDS > 0 and infra_cache.live():
        _memory.put(state.id, state, mark, _memory_seconds())
    return state


class RedisSessionStore:
    """Sessions as JSON under mcp:session:<id>, expiring after MCP_SESSION_IDLE_SECONDS of idleness."""

    def _ttl(self) -> int:
        return settings.MCP_SESSION_IDLE_SECONDS

    def _first_ttl(self) -> int:
        return min(settings.MCP_SESSION_FIRST_IDLE_SECONDS, settings.MCP_SESSION_IDLE_SECONDS)

    async def get(self, session_id: str) -> SessionState | None:
        """The session, from memory when this process read it lately (no round trip), else by a GETEX.

        Served from memory only while subscribed to the changes: an update or end made by any
        process drops it here as soon as its message arrives (it is published in the same round
        trip as the write). A read that overlapped any change is not kept, as it may predate it.
        """
        state = _remembered(session_id)
        if state is not None:
            return state
        mark = _memory.mark()
        return _remember(await redis_client.client().getex(KEY_PREFIX + session_id, ex=self._ttl()), mark)

    async def get_with(self, session_id: str, keys: list[str]) -> tuple[SessionState | None, list[Any]]:
        """Like get, and GET `keys` in the same round trip (a pipeline, not a transaction)."""
        state = _remembered(session_id)
        if state is not None:
            return state, await redis_client.client().mget(keys)
        mark = _memory.mark()
        async with redis_client.client().pipeline(transaction=False) as pipe:
            pipe.getex(KEY_PREFIX + session_id, ex=self._ttl())
            for key in keys:
                pipe.get(key)
            raw, *values = await pipe.execute()
        return _remember(raw, mark), values

    async def peek(self, session_id: str) -> SessionState | None:
        """Read without refreshing the idle timer (server-initiated events are not client activity)."""
        raw = await redis_client.client().get(KEY_PREFIX + session_id)
        return None if raw is None else SessionState.from_dict(json.loads(raw))

    async def save(self, state: SessionState, fresh: bool = True) -> None:
        """Store a new session, and make it countable per tenant in the same round trip. A fresh one
        lives MCP_SESSION_FIRST_IDLE_SECONDS until a request refreshes it (every get does)."""
        ttl = self._first_ttl() if fresh else self._ttl()
        async with redis_client.client().pipeline(transaction=False) as pipe:
            pipe.set(KEY_PREFIX + state.id, json.dumps(state.to_dict()), ex=ttl)
            usage_live.add_session(pipe, state.tenant_id, state.id)
            await pipe.execute()

    async def update(self, state: SessionState) -> bool:
        """Write only if the session still exists (a DELETE may have ended it meanwhile); every
        process drops its copy (the publish is queued behind the write, in one round trip)."""
        _memory.evict(state.id)
        async with redis_client.client().pipeline(transaction=False) as pipe:
            pipe.set(KEY_PREFIX + state.id, json.dumps(state.to_dict()), ex=self._ttl(), xx=True)
            pipe.publish(*_memory.message(state.id))
            result, _heard = await pipe.execute()
        return bool(result)

    async def delete(self, session_id: str, state: SessionState | None = None) -> bool:
        """Delete the session; given its state, also uncount it from its client's and tenant's caps.
        Every process forgets it by the time this returns, but for a message still in flight (AMB-189)."""
        _memory.evict(session_id)
        async with redis_client.client().pipeline(transaction=False) as pipe:
            pipe.delete(KEY_PREFIX + session_id)
            pipe.publish(*_memory.message(session_id))
            if state is not None:
                session_admission.forget(pipe, state.tenant_id, session_id, state.owner)
            deleted, *_ = await pipe.execute()
        return bool(deleted)


class DatabaseSessionStore:
    """Sessions in mcp_app.McpSession, with a process-local cache (the embedded default is one process)."""

    def __init__(self) -> None:
        # id -> (state, last use, last time last_seen_at was written, never used since initialize)
        self._cache: dict[str, tuple[SessionState, float, float, bool]] = {}
        self._touches: set[asyncio.Task] = set()
        self._swept = time.time()

    def _idle(self, fresh: bool = False) -> float:
        idle = float(settings.MCP_SESSION_IDLE_SECONDS)
        return min(float(settings.MCP_SESSION_FIRST_IDLE_SECONDS), idle) if fresh else idle

    def clear(self) -> None:
        self._cache.clear()

    async def get(self, session_id: str) -> SessionState | None:
        return await self._get(session_id, touch=True)

    async def peek(self, session_id: str) -> SessionState | None:
        return await self._get(session_id, touch=False)

    async def _get(self, session_id: str, touch: bool) -> SessionState | None:
        now = time.time()
        cached = self._cache.get(session_id)
        if cached is not None:
            state, used, written, fresh = cached
            if now - used > self._idle(fresh):
                await self.delete(session_id)
                return None
            if touch:
                # The first use is written at once: until then the row expires after the first idle time.
                if fresh or now - written > TOUCH_INTERVAL_SECONDS:
                    written = now
                    self._background(database_sync_to_async(_db_touch)(session_id))
                self._cache[session_id] = (state, now, written, False)
            return _copy(state)
        loaded = await database_sync_to_async(_db_load)(session_id, touch)
        if loaded is None:
            return None
        data, fresh = loaded
        state = SessionState.from_dict(data)
        self._cache[session_id] = (state, now, now, fresh)
        return _copy(state)

    def _background(self, coro: Any) -> None:
        # Keep a reference: the loop holds tasks weakly and would drop the write otherwise.
        task = asyncio.ensure_future(coro)
        self._touches.add(task)
        task.add_done_callback(self._touches.discard)

    async def save(self, state: SessionState, fresh: bool = True) -> None:
        """Store a new session (fresh: never used yet, AMB-104), or write a changed one."""
        now = time.time()
        cached = self._cache.get(state.id)
        if cached is None and now - self._swept > SWEEP_INTERVAL_SECONDS:
            self._sweep(now)
        fresh = fresh if cached is None else cached[3]
        self._cache[state.id] = (_copy(state), now, now, fresh)
        try:
            await database_sync_to_async(_db_save)(state.to_dict(), fresh)
        finally:
            session_admission.settled(state.tenant_id, state.id)

    def _sweep(self, now: float) -> None:
        """Forget idle sessions: clients that never said DELETE must not grow memory or the table."""
        self._swept = now
        idle = self._idle()
        first_idle = self._idle(fresh=True)
        for session_id in [
            k
            for k, (_s, used, _w, fresh) in self._cache.items()
            if now - used > (first_idle if fresh else idle)
        ]:
            del self._cache[session_id]
        self._background(database_sync_to_async(purge_expired)())

    async def update(self, state: SessionState) -> bool:
        if await self.peek(state.id) is None:
            return False
        await self.save(state)
        return True

    async def delete(self, session_id: str, state: SessionState | None = None) -> bool:
        """Delete the session (its row is what the caps count here, so nothing else to uncount)."""
        self._cache.pop(session_id, None)
        return await database_sync_to_async(_db_delete)(session_id)


def _copy(state: SessionState) -> SessionState:
    # Callers mutate what they get (subscriptions.append); the cached copy must not change with it.
    # A JSON round trip is several times faster than copy.deepcopy for this shape.
    return SessionState.from_dict(json.loads(json.dumps(state.to_dict())))


def _db_load(session_id: str, touch: bool) -> tuple[dict[str, Any], bool] | None:
    """The session's state and whether it is still unused; None when missing or expired."""
    row = McpSession.objects.filter(pk=session_id).open().first()
    if row is None:
        McpSession.objects.filter(pk=session_id).delete()  # expired: the row goes now
        return None
    if touch:
        McpSession.objects.filter(pk=session_id).update(last_seen_at=timezone.now())
        return row.state, False
    return row.state, row.last_seen_at < row.created_at


def _db_touch(session_id: str) -> None:
    McpSession.objects.filter(pk=session_id).update(last_seen_at=timezone.now())


def _db_save(data: dict[str, Any], fresh: bool) -> None:
    # A new row's created_at is stamped after last_seen_at: "last seen before made" is a session
    # nobody used yet (McpSessionQuerySet); any later write or touch moves last_seen_at past it.
    _row, created = McpSession.objects.update_or_create(
        pk=data["id"],
        defaults={
            "tenant_id": data["tenant_id"],
            "user_id": data.get("user_id"),
            "owner": data.get("owner") or "",
            "state": data,
            "last_seen_at": timezone.now(),
        },
    )
    if created and not fresh:
        McpSession.objects.filter(pk=data["id"]).update(last_seen_at=F("created_at"))


def _db_delete(session_id: str) -> bool:
    deleted, _ = McpSession.objects.filter(pk=session_id).delete()
    return deleted > 0


def purge_expired() -> int:
    """Delete expired database sessions (idle, or never used and past the first idle time)."""
    deleted, _ = McpSession.objects.expired().delete()
    return deleted


_stores: dict[bool, RedisSessionStore | DatabaseSessionStore] = {}


def get_store() -> RedisSessionStore | DatabaseSessionStore:
    """Return the session store the settings select (Redis when REDIS_URL is set)."""
    use_redis = redis_client.enabled()
    store = _stores.get(use_redis)
    if store is None:
        store = RedisSessionStore() if use_redis else DatabaseSessionStore()
        _stores[use_redis] = store
    return store


async def listening(timeout: float = 5.0) -> bool:
    """Wait until this loop hears session changes, so it may serve sessions from memory (Redis only)."""
    return await infra_cache.listening(timeout)


async def stop_listening() -> None:
    """Stop this loop's session-change listener: every session is read from Redis again."""
    await infra_cache.stop_listening()


def reset() -> None:
    """Forget cached sessions (tests)."""
    _memory.clear()
    for store in _stores.values():
        if isinstance(store, DatabaseSessionStore):
            store.clear()


async def admit(tenant: TenantInfo, session_id: str, owner: str) -> None:
    """Admit a new session before it is made (session_admission), or SessionsRefused past a cap
    (transport/refusals.py answers it with 429). A session ended to make room ends as a DELETE ends
    it: its streams close, its requests are cancelled."""
    admitted = await session_admission.admit(tenant, session_id, owner)
    if admitted.evicted is not None:
        evicted = admitted.evicted
        logger.info("ended session %.8s of the heaviest client to admit another (AMB-101)", evicted)
        await get_store().delete(evicted)
        inflight.cancel_session(evicted)
        await notify.apublish_session(evicted, {"type": "mcp.session_closed", "session_id": evicted})
