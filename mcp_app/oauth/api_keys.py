"""API keys: headless clients (CI jobs, agents on servers) call one tenant's endpoint with a key (AMB-202).

An owner mints a key (`create`: `manage.py mcp_key`, the admin, the API) bound to a member, whose
access it has for as long as that user stays one, or to the tenant itself as a service identity; with
at most the scopes it was given, until it expires, and only from the listed addresses when there are
any. The key is `mcpk_` and 43 random characters, shown once; only its SHA-256 is stored (the same
checksum as access tokens, so a key is found by one indexed lookup and cached, and evicted, exactly as
a token is: `tokens.lookup`). It is sent as `Authorization: Bearer`; in a query string it is refused,
never read. Its use is recorded at most once a minute per key and process, off the request's path.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from audit.models import Action
from audit.trail import record
from mcp_app.core.types import TenantInfo
from mcp_app.oauth import scopes, service_clients, tokens
from tenants.models import ApiKey, AuthMode, Membership, Tenant

logger = logging.getLogger(__name__)

PREFIX = "mcpk_"
SHOWN = 8  # random characters kept in the visible prefix
DEFAULT_DAYS = 90
MAX_DAYS = 730
MAX_ADDRESSES = 50
USE_RECORDED_EVERY = 60.0  # seconds, per key and process

WRONG_ADDRESS = "This API key may not be used from this address."

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Made:
    """A new key: the key itself (shown once) and its row."""

    key: str
    row: ApiKey


def is_key(token: str) -> bool:
    return token.startswith(PREFIX)


def parse_addresses(text: str) -> list[Network]:
    """The networks of an allow-list (addresses or CIDR, one per line or comma-separated); ValueError names a bad one."""
    found: list[Network] = []
    for item in text.replace(",", "\n").split():
        try:
            found.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"{item[:64]!r} is not an IP address or network (e.g. 203.0.113.7 or 10.0.0.0/8)."
            ) from None
    if len(found) > MAX_ADDRESSES:
        raise ValueError(f"At most {MAX_ADDRESSES} addresses or networks.")
    return found


def problem(tenant: Tenant, user: Any, scope: str, days: int, addresses: str = "") -> str | None:
    """Why a key of ``tenant`` for ``user`` (None: the tenant itself) cannot be made (None: it can)."""
    if tenant.auth_mode != AuthMode.OAUTH:
        return f"Tenant {tenant.slug} is public: its endpoint needs no key."
    if user is not None and not service_clients.is_member(user, tenant):
        return f"{user} is not a member of {tenant.slug}: a key acts as a member or as the tenant."
    unknown = sorted(set(scope.split()) - service_clients.grantable(tenant))
    if unknown:
        return f"Not a scope of {tenant.slug}: {', '.join(unknown)}."
    if not 1 <= days <= MAX_DAYS:
        return f"A key lasts 1 to {MAX_DAYS} days."
    try:
        parse_addresses(addresses)
    except ValueError as exc:
        return str(exc)
    return None


def create(
    tenant: Tenant,
    user: Any,
    name: str,
    scope: str = "",
    days: int = DEFAULT_DAYS,
    addresses: str = "",
    created_by: Any = None,
) -> Made:
    """A key of ``tenant`` acting as ``user`` (or the tenant, None) with ``scope`` (default: the base scopes).

    Raises ValueError with a readable message when it cannot be made (see `problem`).
    """
    wanted = " ".join(sorted(set(scope.split() or scopes.BASE_SCOPES)))
    if (why := problem(tenant, user, wanted, days, addresses)) is not None:
        raise ValueError(why)
    raw = PREFIX + secrets.token_urlsafe(32)
    networks = "\n".join(str(net) for net in parse_addresses(addresses))
    with transaction.atomic():
        row = ApiKey.objects.create(
            tenant=tenant,
            name=name[:100] or f"Key of {tenant.slug}",
            user=user,
            prefix=raw[: len(PREFIX) + SHOWN],
            key_hash=tokens.checksum(raw),
            scope=wanted,
            allowed_addresses=networks,
            expires_at=timezone.now() + timedelta(days=days),
            created_by=created_by,
        )
        record(
            Action.API_KEY_CREATED,
            actor=created_by,
            tenant=tenant,
            client_id=client_id(row.pk),
            detail={"prefix": row.prefix, "acts_as": row.acts_as, "scope": wanted, "days": days},
        )
    return Made(key=raw, row=row)


def revoke(row: ApiKey, actor: Any = None) -> None:
    """Refuse the key from now on, in every process (its row stays, for the record)."""
    if row.revoked_at is not None:
        return
    with transaction.atomic():
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
        record(
            Action.API_KEY_REVOKED,
            actor=actor,
            tenant=row.tenant,
            client_id=client_id(row.pk),
            detail={"prefix": row.prefix},
        )


def client_id(pk: int) -> str:
    """The client a key's requests come from: sessions, tasks and per-client quotas are the key's own."""
    return f"api-key:{pk}"


# --- at the endpoint ---------------------------------------------------------------------------------


def _fetch(key: str, tenant_id: int) -> tokens.TokenRecord:
    """Read a usable key of this tenant and whether its user is an active member, in one query.

    Another tenant's key, a revoked one and a made-up one are all "not found" alike.
    """
    membership = Membership.objects.filter(user_id=OuterRef("user_id"), tenant_id=tenant_id)
    fields = ("pk", "user_id", "user__is_active", "scope", "expires_at", "allowed_addresses", "is_member")
    usable = ApiKey.objects.filter(key_hash=key, tenant_id=tenant_id, revoked_at=None)
    rows = list(usable.annotate(is_member=Exists(membership)).values(*fields)[:1])
    if not rows:
        return tokens.TokenRecord(tenant_id=tenant_id, found=False)
    row = rows[0]
    user_id = row["user_id"]
    return tokens.TokenRecord(
        tenant_id=tenant_id,
        found=True,
        user_id=user_id,
        client_id=client_id(row["pk"]),
        scopes=frozenset(row["scope"].split()),
        expires_at=row["expires_at"].timestamp(),
        member=user_id is None or bool(row["is_member"] and row["user__is_active"]),
        networks=tuple(parse_addresses(row["allowed_addresses"])),
        key_id=row["pk"],
    )


async def verify(token: str, tenant: TenantInfo, address: str | None) -> tokens.Grant:
    """The grant a key gives at this tenant from ``address``; tokens.InvalidToken says why it gives none."""
    tokens.ensure_subscriber()
    key = tokens.checksum(token)
    found = await tokens.lookup(key, tenant, _fetch)
    if found.tenant_id != tenant.id:  # cached as another tenant's answer: this tenant's is its own
        found = await tokens.lookup(key, tenant, _fetch, use_cache=False)
    if not found.found:
        raise tokens.InvalidToken(tokens.UNKNOWN)
    if found.expires_at <= time.time():
        raise tokens.InvalidToken(tokens.EXPIRED)
    if not found.member:
        raise tokens.InvalidToken(tokens.NOT_MEMBER)
    if found.networks and not _allowed(address, found.networks):
        raise tokens.InvalidToken(WRONG_ADDRESS)
    if found.key_id is not None:
        _note_use(found.key_id)
    return tokens.Grant(user_id=found.user_id, client_id=found.client_id, scopes=found.scopes)


def _allowed(address: str | None, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in net for net in networks)


_last_noted: dict[int, float] = {}
_noting: set[asyncio.Task[None]] = set()


def _note_use(key_id: int) -> None:
    """Record the key's use now and then; the request does not wait for it."""
    now = time.monotonic()
    if now - _last_noted.get(key_id, -USE_RECORDED_EVERY) < USE_RECORDED_EVERY:
        return
    if len(_last_noted) > 10_000:
        _last_noted.clear()
    _last_noted[key_id] = now
    task = asyncio.get_running_loop().create_task(_save_use(key_id))  # keeps the request's tenant scope
    _noting.add(task)
    task.add_done_callback(_noting.discard)


async def _save_use(key_id: int) -> None:
    try:
        await database_sync_to_async(_write_use)(key_id)
    except Exception:  # a lost "last used" is not worth failing anything for
        logger.warning("could not record an API key's use", exc_info=True)


def _write_use(key_id: int) -> None:
    ApiKey.objects.filter(pk=key_id).update(last_used_at=timezone.now())


def reset() -> None:
    """Forget when keys were last recorded (tests)."""
    _last_noted.clear()
