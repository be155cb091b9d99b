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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Exists, OuterRef, Subquery
from oauth2_provider.models import get_access_token_model

from mcp_app.core.types import TenantInfo
from mcp_app.infra import cache as infra_cache
from mcp_app.infra.cache import Cache
from mcp_app.oauth import resources
from tenants.models import Membership

# Evictions go out on the one cache channel (infra/cache.py): by checksum, or every entry of a user id.
EVICT_CHANNEL = infra_cache.CHANNEL

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
    role: str = ""  # the user's role in the tenant (a policy's `caller.role`, AMB-347); "" for none
    key_id: int | None = None  # an API key's row


@dataclass(frozen=True)
class Grant:
    """A token accepted at a tenant endpoint."""

    user_id: int | None  # None: an API key of the tenant's own service identity
    client_id: str
    scopes: frozenset[str]
    role: str = ""  # the user's role in the tenant: owner, editor, viewer


def checksum(token: str) -> str:
    """DOT's token_checksum: the hex SHA-256 of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _clock() -> float:
    return time.monotonic()


def _wallclock() -> float:
    return time.time()  # token expiry is a wall-clock instant


# checksum -> TokenRecord; valid and refused records in pools of their own (VALID, REFUSED).
VALID, REFUSED = 0, 1
cache = Cache("tokens", MAX_ENTRIES, pools=2, timer=lambda: _clock())
# Concurrent first uses of one token share one lookup (a client opening several requests at once).
_inflight: dict[tuple[str, int], asyncio.Future[TokenRecord]] = {}


def _fetch(key: str, tenant_id: int) -> TokenRecord:
    """Read the token and its user's membership of the tenant in one query."""
    membership = Membership.objects.filter(user_id=OuterRef("user_id"), tenant_id=tenant_id)
    rows = list(
        get_access_token_model()
        .objects.filter(token_checksum=key)
        .annotate(is_member=Exists(membership), member_role=Subquery(membership.values("role")[:1]))
        .values(
            "user_id",
            "user__is_active",
            "application__client_id",
            "scope",
            "expires",
            "resource",
            "is_member",
            "member_role",
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
        role=row["member_role"] or "",
    )


Fetch = Callable[[str, int], TokenRecord]


async def lookup(
    key: str, tenant: TenantInfo, fetch: Fetch | None = None, use_cache: bool = True
) -> TokenRecord:
    """What the cache, or ``fetch`` (default: an access token's), knows of the token whose checksum is ``key``."""
    ttl = float(settings.MCP_TOKEN_CACHE_SECONDS)
    if ttl > 0 and use_cache:
        record = cache.get(key)
        if record is not None:
            return record
    loop = asyncio.get_running_loop()
    pending = _inflight.get((key, tenant.id))
    if pending is not None and pending.get_loop() is loop:
        return await asyncio.shield(pending)
    mark = cache.mark()  # a lookup that overlapped an eviction must not cache its (maybe stale) answer
    future: asyncio.Future[TokenRecord] = asyncio.ensure_future(
        database_sync_to_async(fetch or _fetch)(key, tenant.id)
    )
    _inflight[(key, tenant.id)] = future

    def done(_f: Any) -> None:
        if _inflight.get((key, tenant.id)) is future:
            del _inflight[(key, tenant.id)]

    future.add_done_callback(done)
    record = await asyncio.shield(future)  # a caller that goes away must not cancel the others' lookup
    cache.put(key, record, mark, ttl, VALID if record.found and record.member else REFUSED)
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
    return Grant(user_id=record.user_id, client_id=record.client_id, scopes=record.scopes, role=record.role)


# --- eviction (connected in mcp_app.oauth.signals) -------------------------------------------------------


def on_token_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A saved or deleted AccessToken (revocation, refresh rotation) or API key drops its cached entry everywhere."""
    key = getattr(instance, "token_checksum", "") or getattr(instance, "key_hash", "") or ""
    token = getattr(instance, "token", "")
    if not key and token:
        key = checksum(token)
    if key and kwargs.get("created"):
        cache.evict(key)  # a new token is in no other process's cache: nothing to tell the others
    elif key:
        cache.evict_everywhere(key)


def on_user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A changed membership or user (deactivated, removed) drops the user's cached tokens everywhere."""
    user_id = getattr(instance, "user_id", None) if hasattr(instance, "tenant_id") else instance.pk
    if user_id is not None:
        # A refused "unknown token" entry has no user; a new membership never concerns it.
        cache.evict_by_everywhere("user_id", user_id)


def ensure_subscriber() -> None:
    """Run this loop's eviction subscriber (Redis only, and only while tokens are cached)."""
    if float(settings.MCP_TOKEN_CACHE_SECONDS) <= 0 or not settings.MCP_TOKEN_EVICTION_SUBSCRIBER:
        return
    cache.listen()


async def listening(timeout: float = 5.0) -> bool:
    """Wait until this loop's subscriber listens; False if there is none or it did not within `timeout`."""
    return await infra_cache.listening(timeout)


async def stop_subscriber() -> None:
    """Stop this loop's subscriber (tests: a loop must not close with it running)."""
    await infra_cache.stop_listening()


def reset() -> None:
    """Forget every cached token (tests)."""
    cache.clear()
    _inflight.clear()
