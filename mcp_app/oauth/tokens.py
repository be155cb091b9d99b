"""Bearer tokens at the MCP endpoints: one indexed lookup, cached briefly in this process.

A token is a django-oauth-toolkit AccessToken, found by `token_checksum` (the SHA-256 of the token,
unique and indexed; DOT computes it on save). The same query tells whether the token's user is an
active member of the tenant, so a cache miss costs one query and a hit none. Entries live
MCP_TOKEN_CACHE_SECONDS (default 5) and are keyed by that checksum, never by the token itself
(AU-47). Expiry is checked on every use, cached or not. Deleting or changing a token, a membership or
a user evicts the entries concerned in this process at once, and, with Redis, in every other process
within milliseconds: the change is published on a Redis pub/sub channel (after the transaction
commits) to a subscriber each serving process runs. A message lost with a broken subscription is
covered twice: the subscriber clears the whole cache whenever it (re)subscribes, and entries still
expire after the TTL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from oauth2_provider.models import get_access_token_model

from mcp_app.core.types import TenantInfo
from mcp_app.infra import pubsub, redis_client
from mcp_app.oauth import resources
from tenants.models import Membership

logger = logging.getLogger(__name__)

# Redis pub/sub channel of cache evictions: {"key": checksum} or {"user": user id}.
EVICT_CHANNEL = "mcp:oauth:evict"

# Why a token is refused; the wording reaches the client as error_description.
UNKNOWN = "The access token is unknown, revoked or malformed."
EXPIRED = "The access token has expired."
WRONG_AUDIENCE = "The access token was not issued for this MCP endpoint."
NOT_MEMBER = "The access token's user is not an active member of this tenant."

# Valid and refused entries are kept apart, so a flood of made-up tokens cannot push out good ones.
MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class TokenRecord:
    """What one lookup learnt about a token, as seen from one tenant."""

    tenant_id: int  # the tenant whose membership `member` answers
    found: bool
    user_id: int | None = None
    client_id: str = ""
    scopes: frozenset[str] = frozenset()
    expires_at: float = 0.0  # epoch seconds
    audience: tuple[str, ...] = ()  # normalized resource indicators
    member: bool = False
    networks: tuple[Any, ...] = ()  # an API key's allowed networks (ipaddress), empty: any (AMB-202)
    key_id: int | None = None  # an API key's row


@dataclass(frozen=True)
class Grant:
    """A token accepted at a tenant endpoint."""

    user_id: int | None  # None: an API key of the tenant's own service identity
    client_id: str
    scopes: frozenset[str]


def checksum(token: str) -> str:
    """DOT's token_checksum: the hex SHA-256 of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _clock() -> float:
    return time.monotonic()


def _wallclock() -> float:
    return time.time()  # token expiry is a wall-clock instant


class TokenCache:
    """checksum -> (record, time fetched); two bounded LRU maps; safe to evict from other threads."""

    def __init__(self) -> None:
        self._valid: OrderedDict[str, tuple[TokenRecord, float]] = OrderedDict()
        self._refused: OrderedDict[str, tuple[TokenRecord, float]] = OrderedDict()
        self._lock = threading.Lock()  # signal handlers evict from Django's sync thread
        self.evictions = 0  # a lookup that overlapped an eviction must not cache its (maybe stale) answer

    def get(self, key: str, ttl: float) -> TokenRecord | None:
        with self._lock:
            for store in (self._valid, self._refused):
                entry = store.get(key)
                if entry is None:
                    continue
                if _clock() - entry[1] >= ttl:
                    del store[key]
                    return None
                store.move_to_end(key)
                return entry[0]
        return None

    def put(self, key: str, record: TokenRecord, evictions_seen: int) -> None:
        with self._lock:
            if self.evictions != evictions_seen:
                return
            store = self._valid if record.found and record.member else self._refused
            other = self._refused if store is self._valid else self._valid
            other.pop(key, None)
            store[key] = (record, _clock())
            store.move_to_end(key)
            while len(store) > MAX_ENTRIES:
                store.popitem(last=False)

    def evict(self, key: str) -> None:
        with self._lock:
            self.evictions += 1
            self._valid.pop(key, None)
            self._refused.pop(key, None)

    def evict_user(self, user_id: int) -> None:
        with self._lock:
            self.evictions += 1
            for store in (self._valid, self._refused):
                for key in [k for k, (record, _t) in store.items() if record.user_id == user_id]:
                    del store[key]
            # A refused "unknown token" entry has no user; a new membership never concerns it.

    def clear(self) -> None:
        with self._lock:
            self.evictions += 1
            self._valid.clear()
            self._refused.clear()

    def __len__(self) -> int:
        return len(self._valid) + len(self._refused)


cache = TokenCache()
# Concurrent first uses of one token share one lookup (a client opening several requests at once).
_inflight: dict[tuple[str, int], asyncio.Future[TokenRecord]] = {}


def _fetch(key: str, tenant_id: int) -> TokenRecord:
    """Read the token and its user's membership of the tenant in one query."""
    membership = Membership.objects.filter(user_id=OuterRef("user_id"), tenant_id=tenant_id)
    rows = list(
        get_access_token_model()
        .objects.filter(token_checksum=key)
        .annotate(is_member=Exists(membership))
        .values(
            "user_id",
            "user__is_active",
            "application__client_id",
            "scope",
            "expires",
            "resource",
            "is_member",
        )[:1]
    )
    if not rows:
        return TokenRecord(tenant_id=tenant_id, found=False)
    row = rows[0]
    audience = tuple(
        resources.normalize(uri) or "" for uri in (row["resource"] or []) if isinstance(uri, str)
    )
    return TokenRecord(
        tenant_id=tenant_id,
        found=True,
        user_id=row["user_id"],
        client_id=row["application__client_id"] or "",
        scopes=frozenset((row["scope"] or "").split()),
        expires_at=row["expires"].timestamp() if row["expires"] else 0.0,
        audience=audience,
        member=bool(row["is_member"] and row["user_id"] is not None and row["user__is_active"]),
    )


Fetch = Callable[[str, int], TokenRecord]


async def lookup(
    key: str, tenant: TenantInfo, fetch: Fetch | None = None, use_cache: bool = True
) -> TokenRecord:
    """What the cache, or ``fetch`` (default: an access token's), knows of the token whose checksum is ``key``."""
    ttl = float(settings.MCP_TOKEN_CACHE_SECONDS)
    if ttl > 0 and use_cache:
        record = cache.get(key, ttl)
        if record is not None:
            return record
    loop = asyncio.get_running_loop()
    pending = _inflight.get((key, tenant.id))
    if pending is not None and pending.get_loop() is loop:
        return await asyncio.shield(pending)
    evictions_seen = cache.evictions
    future: asyncio.Future[TokenRecord] = asyncio.ensure_future(
        database_sync_to_async(fetch or _fetch)(key, tenant.id)
    )
    _inflight[(key, tenant.id)] = future

    def done(_f: Any) -> None:
        if _inflight.get((key, tenant.id)) is future:
            del _inflight[(key, tenant.id)]

    future.add_done_callback(done)
    record = await asyncio.shield(future)  # a caller that goes away must not cancel the others' lookup
    if ttl > 0:
        cache.put(key, record, evictions_seen)
    return record


class InvalidToken(Exception):
    """A bearer token that gives no access at this tenant; `reason` is safe to tell the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def verify(token: str, tenant: TenantInfo) -> Grant:
    """Return the grant a bearer token gives at this tenant; InvalidToken says why it gives none."""
    ensure_subscriber()
    key = checksum(token)
    record = await lookup(key, tenant)
    if not record.found:
        raise InvalidToken(UNKNOWN)
    if record.expires_at <= _wallclock():
        raise InvalidToken(EXPIRED)
    # Exactly this endpoint's canonical URI: an empty resource ("unrestricted" to DOT) is refused.
    if record.audience != (resources.canonical_uri(tenant.slug),):
        raise InvalidToken(WRONG_AUDIENCE)
    if record.tenant_id != tenant.id:
        # Membership was read for another tenant id (this slug was deleted and created again).
        record = await lookup(key, tenant, use_cache=False)
        if not record.found:
            raise InvalidToken(UNKNOWN)
    if not record.member or record.user_id is None:
        raise InvalidToken(NOT_MEMBER)
    return Grant(user_id=record.user_id, client_id=record.client_id, scopes=record.scopes)


# --- eviction (connected in mcp_app.oauth.signals) -------------------------------------------------------


def on_token_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A saved or deleted AccessToken (revocation, refresh rotation) or API key drops its cached entry everywhere."""
    key = getattr(instance, "token_checksum", "") or getattr(instance, "key_hash", "") or ""
    if not key and getattr(instance, "token", ""):
        key = checksum(instance.token)
    if key:
        cache.evict(key)
        if not kwargs.get("created"):  # a new token is in no cache: nothing to tell the others
            _publish({"key": key})


def on_user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A changed membership or user (deactivated, removed) drops the user's cached tokens everywhere."""
    user_id = getattr(instance, "user_id", None) if hasattr(instance, "tenant_id") else instance.pk
    if user_id is not None:
        cache.evict_user(user_id)
        _publish({"user": user_id})


def _publish(message: dict[str, Any]) -> None:
    """Tell the other processes, once the change is committed (before, they could re-read the old row)."""
    if not redis_client.enabled():
        return

    def send() -> None:
        try:
            redis_client.sync_client().publish(redis_client.channel(EVICT_CHANNEL), json.dumps(message))
        except Exception:  # the other processes still drop the entry when its TTL ends
            logger.warning("could not publish a token cache eviction", exc_info=True)

    transaction.on_commit(send)


def _apply(raw: Any) -> None:
    try:
        message = json.loads(raw)
    except (TypeError, ValueError):
        return
    if isinstance(message, dict) and isinstance(message.get("key"), str):
        cache.evict(message["key"])
    elif isinstance(message, dict) and isinstance(message.get("user"), int):
        cache.evict_user(message["user"])


# Each serving loop listens for evictions; a (re)subscription clears the whole cache.
_eviction = pubsub.Subscriber(EVICT_CHANNEL, _apply, lambda: cache.clear(), "token eviction")


def ensure_subscriber() -> None:
    """Run this loop's eviction subscriber (Redis only, and only while tokens are cached)."""
    if float(settings.MCP_TOKEN_CACHE_SECONDS) <= 0 or not settings.MCP_TOKEN_EVICTION_SUBSCRIBER:
        return
    _eviction.ensure()


async def listening(timeout: float = 5.0) -> bool:
    """Wait until this loop's subscriber listens; False if there is none or it did not within `timeout`."""
    return await _eviction.listening(timeout)


async def stop_subscriber() -> None:
    """Stop this loop's subscriber (tests: a loop must not close with it running)."""
    await _eviction.stop()


def reset() -> None:
    """Forget every cached token (tests)."""
    cache.clear()
    _inflight.clear()
