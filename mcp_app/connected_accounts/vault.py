"""The token vault: a tool acting as the person gets their access token at a provider here (AMB-208, AMB-210).

`access_token(tenant_id, user_id, provider_name)` is the one call: the connection's access token,
refreshed first when it is about to expire, or `NotConnected` (with the signed start link to send
the person to, by URL-mode elicitation) when the person has no usable connection. A refresh runs
once per connection across the deployment: a lease (infra/lease.py, Redis `SET NX PX` with
REDIS_URL, in process memory on the embedded defaults, which run one process) is held around it,
and the others wait and read the refreshed row. A provider answering `invalid_grant` has dropped
the grant: the connection is deleted and the person asked to connect again.

The start link is signed (SECRET_KEY) and names the tenant, the provider, the user (as an HMAC
mark, never anything readable about the person) and the elicitation id, if any. When a connection
made through a link with an elicitation id completes, the callback leaves a note under that id
through the sensitive form's store (handlers/url_forms.py), which `wait_connected` takes: the caller
then sends `notifications/elicitation/complete`, as the `form` kind does.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signing
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from audit.models import Action
from audit.trail import record
from mcp_app.connected_accounts import provider_http
from mcp_app.handlers import url_forms
from mcp_app.handlers.accounts import ConnectionUnavailable, NotConnected
from mcp_app.handlers.secrets import SecretsError, encrypt_secrets
from mcp_app.infra.cache import Cache
from mcp_app.infra.lease import Lease
from mcp_app.models.connections import Connection, Provider
from tenants import wall
from tenants.models import Tenant

# The ORM is reached through asgiref's sync_to_async, not channels' database_sync_to_async: the pages and
# the admin call the vault from inside a request (the admin's delete inside its transaction), whose
# connection the latter would close under it.
SALT = "mcp.connection-start"
# A token this close to its expiry is refreshed before it is handed out.
EARLY_SECONDS = 30.0
# How long a refresh may hold its lease, and how long the others wait for it.
LEASE_SECONDS = provider_http.FETCH_SECONDS + 5
POLL_SECONDS = 0.1


def start_link(
    *, tenant_slug: str, tenant_id: int, user_id: int, provider_name: str, elicitation_id: str | None = None
) -> str:
    """The signed link of the start page for this person, tenant and provider."""
    payload = {"t": tenant_id, "u": url_forms.user_mark(user_id), "p": provider_name, "e": elicitation_id}
    token = signing.dumps(payload, salt=SALT, compress=True)
    return f"{settings.MCP_PUBLIC_URL}/t/{tenant_slug}/connections/{provider_name}/start?link={token}"


def read_link(token: str) -> dict[str, Any] | None:
    """A start link's payload, or None for one forged, damaged or expired."""
    try:
        payload = signing.loads(token, salt=SALT, max_age=settings.MCP_URL_FORM_SECONDS)
    except signing.BadSignature:
        return None
    return payload if isinstance(payload, dict) else None


def client_of(provider: Provider) -> provider_http.Client:
    """What a request to ``provider`` needs, its secret decrypted (SecretsError when no key reads it)."""
    return provider_http.Client(
        label=provider.display_name or provider.name,
        client_id=provider.client_id,
        client_secret=provider.secret(),
        discovery_url=provider.discovery_url,
        authorize_url=provider.authorize_url,
        token_url=provider.token_url,
        revocation_url=provider.revocation_url,
        scopes=provider.scopes,
        resource=provider.resource,
    )


def _expiry(tokens: provider_http.Tokens) -> datetime.datetime | None:
    if tokens.expires_at is None:
        return None
    return datetime.datetime.fromtimestamp(tokens.expires_at, tz=datetime.UTC)


def save_connection(provider: Provider, user: Any, tokens: provider_http.Tokens) -> Connection:
    """Keep the person's new tokens (a second connect replaces the first)."""
    with transaction.atomic():
        for old in Connection.objects.filter(provider=provider, user=user):
            _drop(old, "replaced")
        return Connection.objects.create(
            tenant_id=provider.tenant_id,
            provider=provider,
            user=user,
            tokens=encrypt_secrets(tokens.sealed()),
            expires_at=_expiry(tokens),
        )


def _fresh(connection: Connection) -> bool:
    return connection.expires_at is None or connection.expires_at.timestamp() > time.time() + EARLY_SECONDS


def _load(tenant_id: int, user_id: int, provider_name: str) -> Connection | None:
    with wall.tenant(tenant_id):
        return (
            Connection.objects.select_related("provider", "tenant", "user")
            .filter(tenant_id=tenant_id, user_id=user_id, provider__name=provider_name)
            .first()
        )


def _not_connected(
    tenant_id: int, user_id: int, provider_name: str, elicitation_id: str | None
) -> NotConnected | ConnectionUnavailable:
    with wall.tenant(tenant_id):
        tenant = Tenant.objects.get(pk=tenant_id)
        provider = Provider.objects.filter(tenant_id=tenant_id, name=provider_name).first()
    if provider is None:
        # A tool naming a provider the tenant lacks: no link to send anyone to, an owner must fix it.
        return ConnectionUnavailable(f"This server has no account provider named {provider_name!r}.")
    link = start_link(
        tenant_slug=tenant.slug,
        tenant_id=tenant_id,
        user_id=user_id,
        provider_name=provider_name,
        elicitation_id=elicitation_id,
    )
    return NotConnected(str(provider), link)


def _drop(connection: Connection, reason: str) -> None:
    with wall.tenant(connection.tenant_id):
        vars(connection)["drop_reason"] = reason  # never a column: read by the audit receiver
        connection.delete()


def _store_refreshed(connection: Connection, tokens: provider_http.Tokens) -> None:
    with wall.tenant(connection.tenant_id):
        Connection.objects.filter(pk=connection.pk).update(
            tokens=encrypt_secrets(tokens.sealed()), expires_at=_expiry(tokens), refreshed_at=timezone.now()
        )


# Tokens handed out lately, per (tenant, user, provider): a tool called again and again reads no row and
# decrypts nothing for MCP_TOKEN_CACHE_SECONDS, as bearer tokens are cached at the endpoint. A saved or
# deleted connection (a refresh, a Disconnect, invalid_grant) forgets its entry here at once and, with
# Redis, in every other process within milliseconds (published after the commit, as token evictions are).
MAX_HANDED = 10_000
_handed = Cache("connections", MAX_HANDED)


def on_connection_changed(sender: Any, instance: Connection, **kwargs: Any) -> None:
    """A saved or deleted Connection is forgotten here and, after the commit, in every other process."""
    if kwargs.get("created"):
        return  # nobody was handed a token of a connection that did not exist
    cached = instance._state.fields_cache.get("provider")
    name = (
        cached.name
        if cached is not None
        else (Provider.objects.filter(pk=instance.provider_id).values_list("name", flat=True).first() or "")
    )
    _handed.evict_everywhere((instance.tenant_id, instance.user_id, name))


for _signal, _uid in ((post_save, "mcp-connection-save"), (post_delete, "mcp-connection-delete")):
    _signal.connect(on_connection_changed, sender=Connection, dispatch_uid=_uid)


def _remember(key: tuple[int, int, str], token: str, expires_at: float | None, mark: int) -> str:
    seconds = float(settings.MCP_TOKEN_CACHE_SECONDS)
    if expires_at is not None:  # never past the moment it would be refreshed
        seconds = min(seconds, expires_at - time.time() - EARLY_SECONDS)
    _handed.put(key, token, mark, seconds)  # not if a change was heard since `mark`: it may be the old token
    return token


async def access_token(
    tenant_id: int, user_id: int, provider_name: str, elicitation_id: str | None = None
) -> str:
    """The person's access token at the provider; raises NotConnected (send them to its start_url) or
    ConnectionUnavailable (its message says why: the provider unreachable, or no such provider here)."""
    if float(settings.MCP_TOKEN_CACHE_SECONDS) > 0 and settings.MCP_TOKEN_EVICTION_SUBSCRIBER:
        _handed.listen()
    key = (tenant_id, user_id, provider_name)
    handed = _handed.get(key)
    if handed is not None:
        return handed
    mark = _handed.mark()
    connection = await sync_to_async(_load)(tenant_id, user_id, provider_name)
    if connection is not None and _fresh(connection):
        try:
            token = str(connection.token_set()["access_token"])
        except (SecretsError, KeyError):
            await sync_to_async(_drop)(connection, "unreadable")
            connection = None
        else:
            expires = connection.expires_at.timestamp() if connection.expires_at else None
            return _remember(key, token, expires, mark)
    if connection is not None:
        refreshed = await _refreshed(tenant_id, user_id, provider_name, connection.pk)
        if refreshed is not None:
            return refreshed
    raise await sync_to_async(_not_connected)(tenant_id, user_id, provider_name, elicitation_id)


def forget() -> None:
    """Forget the tokens handed out lately (tests)."""
    _handed.clear()


async def _refreshed(tenant_id: int, user_id: int, provider_name: str, connection_id: int) -> str | None:
    """The refreshed access token (one refresh across the deployment), or None: connect again."""
    lease = Lease(f"connection-refresh:{connection_id}", secrets.token_hex(8), LEASE_SECONDS)
    deadline = time.monotonic() + LEASE_SECONDS
    while True:
        if await lease.take():
            try:
                return await _refresh_held(tenant_id, user_id, provider_name)
            finally:
                await lease.release()
        await asyncio.sleep(POLL_SECONDS)
        connection = await sync_to_async(_load)(tenant_id, user_id, provider_name)
        if connection is None:
            return None
        if _fresh(connection):
            return str(connection.token_set()["access_token"])
        if time.monotonic() > deadline:
            raise ConnectionUnavailable(
                f"The connection to {connection.provider} is being renewed; try again."
            )


async def _refresh_held(tenant_id: int, user_id: int, provider_name: str) -> str | None:
    # Read again under the lease: another process may have refreshed it since we looked.
    connection = await sync_to_async(_load)(tenant_id, user_id, provider_name)
    if connection is None:
        return None
    try:
        held = connection.token_set()
    except SecretsError:
        await sync_to_async(_drop)(connection, "unreadable")
        return None
    if _fresh(connection):
        return str(held["access_token"])
    if not held.get("refresh_token"):
        await sync_to_async(_drop)(connection, "expired")
        return None
    try:
        client = await sync_to_async(client_of)(connection.provider)
        tokens = await provider_http.refresh(client, held["refresh_token"])
    except provider_http.ProviderRefused as exc:
        if exc.error == "invalid_grant":
            await sync_to_async(_drop)(connection, "invalid_grant")
            return None
        await sync_to_async(_refresh_failed)(connection, exc.message)
        raise ConnectionUnavailable(exc.message) from None
    except SecretsError:
        await sync_to_async(_refresh_failed)(connection, "its client secret cannot be decrypted")
        raise ConnectionUnavailable(
            f"{connection.provider}: its client secret must be entered again."
        ) from None
    await sync_to_async(_store_refreshed)(connection, tokens)
    return tokens.access_token


def _refresh_failed(connection: Connection, why: str) -> None:
    # Recorded here, beside the models' receivers (signals/audit_trail.py): no row changes when a refresh fails.
    with wall.tenant(connection.tenant_id):
        record(
            Action.CONNECTION_REFRESH_FAILED,
            actor=connection.user,
            tenant=connection.tenant,
            detail={"provider": connection.provider.name, "reason": why},
        )


async def disconnect(connection: Connection) -> None:
    """Revoke the person's tokens at the provider (RFC 7009, where offered), then forget them."""
    try:
        held = connection.token_set()
        client = await sync_to_async(client_of)(connection.provider)
    except SecretsError:
        held, client = {}, None
    if client is not None:
        # The refresh token first: revoking it ends the grant (and, at most providers, its access tokens).
        for hint in ("refresh_token", "access_token"):
            try:
                await provider_http.revoke(client, str(held.get(hint) or ""), hint)
            except provider_http.ProviderRefused:
                break
    await sync_to_async(_drop)(connection, "disconnected")


async def wait_connected(elicitation_id: str, seconds: float) -> bool:
    """Whether a connection started through a link with this elicitation id completed within ``seconds``."""
    return await url_forms.take(elicitation_id, seconds) is not None


def note_connected(elicitation_id: str, provider_name: str) -> None:
    """Tell the waiting tool (wait_connected) that the person connected."""
    url_forms.store(elicitation_id, {"connected": provider_name})
