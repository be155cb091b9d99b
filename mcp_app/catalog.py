"""A tenant's facts and enabled definitions, cached in process memory per definitions_version.

The hot path (a cache hit) makes no ORM query: the cached entry is checked against the tenant's
current version, read from Redis when REDIS_URL is set (every process sees every edit), or from
this process's own memory otherwise (the single process sees every edit through note_change).
Edits reach us through `note_change`, which the signals call after commit.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from .catalog_types import Catalog, PromptDef, ResourceDef, TemplateDef, ToolDef
from .protocol.context import TenantInfo
from .transport import redis_client

logger = logging.getLogger(__name__)

# Without Redis, re-read the version from the database this often, so that an edit made by another
# process (a management command, a shell) is picked up eventually; note_change makes it immediate.
LOCAL_RECHECK_SECONDS: float = getattr(settings, "MCP_VERSION_RECHECK_SECONDS", 5.0)

# Entries are keyed by the change token observed *before* loading, and are valid while the token
# is unchanged (equality, not order). With Redis the token is a shared counter that every change
# increments after commit; it is unrelated to the database's definitions_version, so a restored or
# recreated database can never make a stale entry look current. Without Redis the token is the
# database's definitions_version itself, as seen by this process.
_tenants: dict[str, tuple[TenantInfo, int]] = {}  # slug -> (info, token it is valid for)
_catalogs: dict[int, tuple[int, Catalog]] = {}  # tenant id -> (token it is valid for, catalog)
_local_versions: dict[int, tuple[int, float]] = {}  # tenant id -> (version, monotonic time checked)
# Tokens already read by the current request (None outside a request: every call reads).
_request_tokens: ContextVar[dict[int, int] | None] = ContextVar("mcp_request_tokens", default=None)

# A missing counter (new tenant, flushed Redis) starts at the current time in microseconds, far
# above any value an entry cached before the flush can hold; INCR then moves it on every change.
_BUMP = """
if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])
"""


def version_key(tenant_id: int) -> str:
    return f"mcp:tenant:{tenant_id}:token"


def _fresh_token() -> int:
    return time.time_ns() // 1000


# --- Redis clients -------------------------------------------------------------------------------


def _async_redis() -> Any:
    # Shared with the transport: one blocking pool per loop and URL (see transport.redis_client).
    return redis_client.client()


def _redis_sync() -> Any:
    return redis_client.sync_client()


# --- Change tokens --------------------------------------------------------------------------------


def _db_version(tenant_id: int) -> int:
    from tenants.models import Tenant

    version = Tenant.objects.filter(pk=tenant_id).values_list("definitions_version", flat=True).first()
    return int(version or 0)


def _remember_local(tenant_id: int, version: int) -> None:
    # Plain assignment: the database is the truth, even when it went backwards (recreated); an
    # out-of-order note_change is corrected by the next recheck, and it dropped the caches anyway.
    _local_versions[tenant_id] = (version, time.monotonic())


def begin_request() -> None:
    """Read each tenant's change token at most once for the rest of this request.

    The memo lives in a context variable, so the tasks the request starts (its dispatches) share
    it and other requests never see it. A request then works on the definitions as of its start;
    entries stay keyed by a token read before loading, so the next request sees any later edit.
    """
    _request_tokens.set({})


def remember_token(tenant_id: int, raw: Any) -> bool:
    """Record a token read elsewhere (a pipelined GET) for this request; False if it is unusable."""
    memo = _request_tokens.get()
    if memo is None or raw is None:
        return False
    try:
        memo[tenant_id] = int(raw)
    except (TypeError, ValueError):
        return False
    return True


def cached_tenant_id(slug: str) -> int | None:
    """The id of the tenant this process has cached under `slug`, if any (no I/O)."""
    cached = _tenants.get(slug)
    return None if cached is None else cached[0].id


async def current_version(tenant_id: int) -> int:
    """Return the tenant's change token: entries cached under another token are stale."""
    memo = _request_tokens.get()
    if memo is not None and tenant_id in memo:
        return memo[tenant_id]
    if settings.REDIS_URL:
        client = _async_redis()
        try:
            value = await client.get(version_key(tenant_id))
            if value is None:
                # First reader after a flush or for a new tenant: start the counter (NX: a
                # concurrent start or bump wins) and use whatever is stored now.
                await client.set(version_key(tenant_id), _fresh_token(), nx=True)
                value = await client.get(version_key(tenant_id))
            if memo is not None:
                memo[tenant_id] = int(value)
            return int(value)
        except Exception:
            # Without the shared token nothing can be trusted as current: report a value no
            # entry holds, so the caller reads the database.
            logger.warning("Redis unavailable; tenant %s is read from the database", tenant_id, exc_info=True)
            return -_fresh_token()
    entry = _local_versions.get(tenant_id)
    if entry is not None and time.monotonic() - entry[1] < LOCAL_RECHECK_SECONDS:
        return entry[0]
    version = await database_sync_to_async(_db_version)(tenant_id)
    _remember_local(tenant_id, version)
    return version


def note_change(tenant_id: int, version: int) -> None:
    """Drop the tenant's cached facts and catalog and move its change token (called after commit)."""
    _catalogs.pop(tenant_id, None)
    for slug, (info, _token) in list(_tenants.items()):
        if info.id == tenant_id:
            _tenants.pop(slug, None)
    _remember_local(tenant_id, version)
    if settings.REDIS_URL:
        try:
            _redis_sync().eval(_BUMP, 1, version_key(tenant_id), _fresh_token())
        except Exception:  # the edit has committed; a failed publish must not break it
            logger.exception("could not move tenant %s change token in Redis", tenant_id)


def clear_caches() -> None:
    """Forget everything cached in this process (tests, and after a deployment-wide reset)."""
    _tenants.clear()
    _catalogs.clear()
    _local_versions.clear()


# --- Tenants ------------------------------------------------------------------------------------


def _load_tenant(slug: str) -> tuple[TenantInfo, int] | None:
    from tenants.models import AuthMode, Tenant

    from .models import Tool

    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        return None
    tool_scopes: tuple[tuple[str, str], ...] = ()
    if tenant.auth_mode != AuthMode.PUBLIC:
        rows = Tool.objects.for_tenant(tenant.pk).filter(enabled=True).exclude(required_scope="")
        tool_scopes = tuple(rows.order_by("name").values_list("name", "required_scope"))
    info = TenantInfo(
        id=tenant.pk,
        slug=tenant.slug,
        name=tenant.name,
        title=tenant.title,
        description=tenant.description,
        server_version=tenant.server_version,
        website_url=tenant.website_url,
        icons=tuple(tenant.icons or ()),
        instructions=tenant.instructions,
        allowed_origins=tuple(tenant.origin_list),
        is_active=tenant.is_active,
        auth_mode=tenant.auth_mode,
        tool_scopes=tool_scopes,
    )
    return info, int(tenant.definitions_version)


async def get_tenant(slug: str) -> TenantInfo | None:
    """Return the active tenant with this slug, or None (unknown and inactive look the same)."""
    cached = _tenants.get(slug)
    if cached is not None:
        token = await current_version(cached[0].id)
        if token == cached[1]:
            return cached[0] if cached[0].is_active else None
        loaded = await database_sync_to_async(_load_tenant)(slug)
        if loaded is not None and loaded[0].id != cached[0].id:
            token = None  # the slug now names another tenant (deleted and recreated)
    else:
        token = None
        loaded = await database_sync_to_async(_load_tenant)(slug)
    if loaded is None:
        _tenants.pop(slug, None)
        return None
    if token is None:
        # A cold slug: its token can only be read once the id is known, and the row must be read
        # after the token to be valid under it, so read the row again.
        token = await current_version(loaded[0].id)
        loaded = await database_sync_to_async(_load_tenant)(slug)
        if loaded is None:
            return None
    info = loaded[0]
    _tenants[slug] = (info, token)
    return info if info.is_active else None


# --- Catalogs -----------------------------------------------------------------------------------


def _load_catalog(tenant_id: int) -> Catalog:
    from .models import Prompt, Resource, ResourceTemplate, Tool

    # The version is read before the rows: an edit landing in between makes the rows newer than
    # the version, and the next check reloads; the reverse order could pin stale rows.
    version = _db_version(tenant_id)
    tools = tuple(
        ToolDef(
            id=row.pk,
            name=row.name,
            title=row.title,
            description=row.description,
            input_schema=row.input_schema or {"type": "object"},
            output_schema=row.output_schema or None,
            annotations=row.annotations or {},
            icons=list(row.icons or []),
            meta=row.meta or {},
            handler=row.handler,
            handler_config=row.handler_config or {},
            handler_secrets=row.handler_secrets or "",
            timeout_seconds=row.timeout_seconds,
            required_scope=row.required_scope,
            execution=row.execution,
        )
        for row in Tool.objects.for_tenant(tenant_id).filter(enabled=True)
    )
    prompts = tuple(
        PromptDef(
            id=row.pk,
            name=row.name,
            title=row.title,
            description=row.description,
            arguments=list(row.arguments or []),
            messages=list(row.messages or []),
            icons=list(row.icons or []),
            meta=row.meta or {},
        )
        for row in Prompt.objects.for_tenant(tenant_id).filter(enabled=True)
    )
    resources = tuple(
        ResourceDef(
            id=row.pk,
            uri=row.uri,
            name=row.name,
            title=row.title,
            description=row.description,
            mime_type=row.mime_type,
            text=row.text,
            blob=bytes(row.blob) if row.blob is not None else None,  # PostgreSQL hands out memoryview
            annotations=row.annotations or {},
            icons=list(row.icons or []),
            meta=row.meta or {},
        )
        for row in Resource.objects.for_tenant(tenant_id).filter(enabled=True)
    )
    templates = tuple(
        TemplateDef(
            id=row.pk,
            uri_template=row.uri_template,
            name=row.name,
            title=row.title,
            description=row.description,
            mime_type=row.mime_type,
            handler=row.handler,
            handler_config=row.handler_config or {},
            completions=row.completions or {},
            annotations=row.annotations or {},
            icons=list(row.icons or []),
            meta=row.meta or {},
        )
        for row in ResourceTemplate.objects.for_tenant(tenant_id).filter(enabled=True)
    )
    # Sorted here, not by the database: pagination compares keys with Python's ordering, and a
    # PostgreSQL locale collation orders "B" and "a" differently.
    tools = tuple(sorted(tools, key=lambda t: t.name))
    prompts = tuple(sorted(prompts, key=lambda p: p.name))
    resources = tuple(sorted(resources, key=lambda r: r.uri))
    templates = tuple(sorted(templates, key=lambda t: t.uri_template))
    return Catalog(
        tenant_id=tenant_id,
        version=version,
        tools=tools,
        prompts=prompts,
        resources=resources,
        templates=templates,
        tools_by_name={t.name: t for t in tools},
        prompts_by_name={p.name: p for p in prompts},
        resources_by_uri={r.uri: r for r in resources},
    )


async def get_catalog(tenant_id: int) -> Catalog:
    """Return the tenant's enabled definitions, loading them only when the change token moved."""
    token = await current_version(tenant_id)
    cached = _catalogs.get(tenant_id)
    if cached is not None and cached[0] == token:
        return cached[1]
    catalog = await database_sync_to_async(_load_catalog)(tenant_id)
    _catalogs[tenant_id] = (token, catalog)
    return catalog
