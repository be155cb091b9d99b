"""A tenant's facts and enabled definitions, cached in process memory per change token.

The hot path (a cache hit) makes no ORM query: the cached entry is checked against the tenant's
current token (catalog.tokens). Edits reach us through `note_change`, which the signals call after
commit. A process keeps the MCP_CATALOG_TENANTS tenants it served last (least recently used out,
AMB-367): a fleet serving 100,000 tenants holds what its traffic needs, not every catalog it ever
loaded; an evicted tenant's next request loads it again, as a cold one.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from cachetools import LRUCache
from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Q

from mcp_app.catalog import published_extras, tokens
from mcp_app.core import upstream_uris
from mcp_app.core.types import (
    Catalog,
    ExternalIdentity,
    PromptDef,
    ResourceDef,
    TemplateDef,
    TenantInfo,
    ToolDef,
)
from mcp_app.federation.upstream_tasks import runs_as_task
from mcp_app.handlers.upstream import TASK_KEY
from mcp_app.models import (
    Guardrail,
    Policy,
    Prompt,
    Quota,
    Resource,
    ResourceTemplate,
    TaskSupport,
    Tool,
    Upstream,
    UpstreamTool,
)
from tenants import wall
from tenants.models import AuthMode, Tenant

# Entries are keyed by the change token observed *before* loading, and are valid while the token
# is unchanged (equality, not order).
# slug -> (info, token it is valid for); tenant id -> (token it is valid for, catalog)
_tenants: LRUCache[str, tuple[TenantInfo, int]] = LRUCache(settings.MCP_CATALOG_TENANTS)
_catalogs: LRUCache[int, tuple[int, Catalog]] = LRUCache(settings.MCP_CATALOG_TENANTS)
# The loop reads and fills them, a saving thread drops entries (note_change): an LRU reorders on read.
_lock = threading.Lock()


def cached_tenant_id(slug: str) -> int | None:
    """The id of the tenant this process has cached under `slug`, if any (no I/O)."""
    with _lock:
        cached = _tenants.get(slug)
    return None if cached is None else cached[0].id


def note_change(tenant_id: int, version: int) -> int | None:
    """Drop the tenant's cached facts and catalog and move its change token (called after commit).

    Returns the new shared change token, if any (tokens.move).
    """
    with _lock:
        _catalogs.pop(tenant_id, None)
        for slug, (info, _token) in list(_tenants.items()):
            if info.id == tenant_id:
                _tenants.pop(slug, None)
    return tokens.move(tenant_id, version)


def clear_caches() -> None:
    """Forget everything cached in this process (tests, and after a deployment-wide reset)."""
    with _lock:
        _tenants.clear()
        _catalogs.clear()
    tokens.forget_local()


# --- Tenants ------------------------------------------------------------------------------------


def _has_task_tools(tenant_id: int) -> bool:
    """Whether a tool may run as a task (models.Tool.resolved_task_support): initialize declares
    `tasks` from this, without loading the catalog."""
    may = Q(task_support__in=(TaskSupport.OPTIONAL, TaskSupport.REQUIRED))
    may |= Q(task_support=TaskSupport.AUTO, execution="background")
    # A published upstream tool its upstream runs as a task is optional here too (AMB-200).
    upstream_tasks = ("required", "optional")
    may |= Q(task_support=TaskSupport.AUTO, upstream_tool__pinned__execution__taskSupport__in=upstream_tasks)
    return Tool.objects.for_tenant(tenant_id).published().filter(may, enabled=True).exists()


def tenant_info(
    tenant: Tenant, tool_scopes: tuple[tuple[str, str], ...] = (), has_task_tools: bool = False
) -> TenantInfo:
    """The immutable facts a request needs about a tenant row."""
    return TenantInfo(
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
        cache_ttl_ms=tenant.cache_ttl_ms,
        cache_scope=tenant.cache_scope,
        task_ttl_seconds=tenant.task_ttl_seconds,
        has_task_tools=has_task_tools,
        calls_per_minute=tenant.calls_per_minute,
        calls_per_minute_per_tool=tenant.calls_per_minute_per_tool,
        calls_per_minute_per_caller=tenant.calls_per_minute_per_caller,
        max_sessions=tenant.max_sessions,
        max_background_runs=tenant.max_background_runs,
        max_streams=tenant.max_streams,
        max_streams_per_session=tenant.max_streams_per_session,
        max_body_bytes=tenant.max_body_bytes,
        stream_poll_seconds=tenant.stream_poll_seconds,
        stream_poll_retry_ms=tenant.stream_poll_retry_ms,
        identity=external_identity(tenant),
        audit_sampling=tuple(sorted((tenant.audit_sampling or {}).items())),
        tool_discovery=tenant.tool_discovery,
    )


def external_identity(tenant: Tenant) -> ExternalIdentity | None:
    """The tenant's own identity provider, if it set one (checked on save: tenants/identity_provider.py)."""
    config = tenant.identity if isinstance(tenant.identity, dict) else {}
    if not config.get("issuer") or not config.get("audience"):
        return None
    return ExternalIdentity(
        issuer=str(config["issuer"]),
        audience=str(config["audience"]),
        jwks_uri=str(config.get("jwks_uri") or ""),
        introspection_url=str(config.get("introspection_url") or ""),
        client_id=str(config.get("client_id") or ""),
        client_secret=tenant.identity_client_secret,
        scope_claim=str(config.get("scope_claim") or "scope"),
        scope_map=tuple(
            (str(theirs), tuple(str(ours).split()))
            for theirs, ours in (config.get("scope_map") or {}).items()
        ),
        algorithms=tuple(config.get("algorithms") or ("RS256",)),
        keep_platform_tokens=bool(config.get("keep_platform_tokens")),
    )


def _load_tenant(slug: str) -> tuple[TenantInfo, int] | None:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        return None
    tool_scopes: tuple[tuple[str, str], ...] = ()
    # Read in the tenant's own scope, whatever the caller's: the request has no tenant yet, and an
    # empty list of scopes seen through the wall would let every token call every tool (AMB-96).
    with wall.tenant(tenant.pk):
        if tenant.auth_mode != AuthMode.PUBLIC:
            rows = Tool.objects.needing_scopes(tenant.pk)
            tool_scopes = tuple(rows.order_by("name").values_list("name", "required_scope"))
        info = tenant_info(tenant, tool_scopes, _has_task_tools(tenant.pk))
    return info, int(tenant.definitions_version)


async def get_tenant(slug: str) -> TenantInfo | None:
    """Return the active tenant with this slug, or None (unknown and inactive look the same)."""
    with _lock:
        cached = _tenants.get(slug)
    token: int | None
    if cached is not None:
        token = await tokens.current_version(cached[0].id)
        if token == cached[1]:
            return cached[0] if cached[0].is_active else None
        loaded = await database_sync_to_async(_load_tenant)(slug)
        if loaded is not None and loaded[0].id != cached[0].id:
            token = None  # the slug now names another tenant (deleted and recreated)
    else:
        token = None
        loaded = await database_sync_to_async(_load_tenant)(slug)
    if loaded is None:
        with _lock:
            _tenants.pop(slug, None)
        return None
    if token is None:
        # A cold slug: its token can only be read once the id is known, and the row must be read
        # after the token to be valid under it, so read the row again.
        token = await tokens.current_version(loaded[0].id)
        loaded = await database_sync_to_async(_load_tenant)(slug)
        if loaded is None:
            return None
    info = loaded[0]
    with _lock:
        _tenants[slug] = (info, token)
    return info if info.is_active else None


# --- Catalogs -----------------------------------------------------------------------------------


def _load_catalog(tenant_id: int) -> Catalog:
    with wall.tenant(tenant_id):  # this tenant's definitions, whoever asks (AMB-96)
        return _read_catalog(tenant_id)


def _served(model: type[Prompt | Resource | ResourceTemplate], tenant_id: int) -> Any:
    """What clients get: published and enabled (a draft waits for its publish, AMB-218)."""
    return model.objects.for_tenant(tenant_id).published().filter(enabled=True)


def _read_catalog(tenant_id: int) -> Catalog:
    # The version is read before the rows: an edit landing in between makes the rows newer than
    # the version, and the next check reloads; the reverse order could pin stale rows.
    version = tokens.db_version(tenant_id)
    tools = _tools(tenant_id)
    prompts = tuple(row.to_def() for row in _served(Prompt, tenant_id))
    resources = tuple(row.to_def() for row in _served(Resource, tenant_id))
    templates = tuple(row.to_def() for row in _served(ResourceTemplate, tenant_id))
    prompts, resources, templates = _with_upstream_extras(tenant_id, prompts, resources, templates)
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
        policies=tuple(
            row.to_def() for row in Policy.objects.for_tenant(tenant_id).published().filter(enabled=True)
        ),
        quotas=tuple(
            row.to_def() for row in Quota.objects.for_tenant(tenant_id).published().filter(enabled=True)
        ),
        guardrails=tuple(
            row.to_def() for row in Guardrail.objects.for_tenant(tenant_id).published().filter(enabled=True)
        ),
    )


def _tools(tenant_id: int) -> tuple[ToolDef, ...]:
    """The enabled tools; an upstream tool only while its upstream is enabled (it exists: AMB-310)."""
    found = list(
        Tool.objects.for_tenant(tenant_id).published().filter(enabled=True).select_related("upstream")
    )
    upstream_rows = [row for row in found if row.handler == "upstream"]
    if not upstream_rows:
        return tuple(row.to_def() for row in found)
    # How each published tool's upstream runs it, by its pinned definition (AMB-199); whether the
    # owner left the tool's own task support automatic (AMB-200).
    pins = UpstreamTool.objects.filter(tenant_id=tenant_id, tool__in=[row.pk for row in upstream_rows])
    upstream_task = {
        tool_id: runs_as_task(pinned) for tool_id, pinned in pins.values_list("tool_id", "pinned")
    }
    tools = []
    for row in found:
        if row.handler != "upstream":
            tools.append(row.to_def())
        elif row.upstream is not None and row.upstream.enabled:
            task = upstream_task.get(row.pk, "forbidden")
            tools.append(_resolved(row.to_def(), row.upstream, task, row.task_support == TaskSupport.AUTO))
    return tuple(tools)


def _with_upstream_extras(
    tenant_id: int,
    prompts: tuple[PromptDef, ...],
    resources: tuple[ResourceDef, ...],
    templates: tuple[TemplateDef, ...],
) -> tuple[tuple[PromptDef, ...], tuple[ResourceDef, ...], tuple[TemplateDef, ...]]:
    """The tenant's own definitions, then the published prompts, resources and templates of its enabled
    upstreams (AMB-190..192); the tenant's own win a collision, and so does the first upstream by name."""
    rows = Upstream.objects.for_tenant(tenant_id).filter(enabled=True)
    rows = rows.filter(Q(publish_prompts=True) | Q(publish_resources=True)).order_by("name")
    names = {p.name for p in prompts}
    uris = {r.uri for r in resources}
    uri_templates = {t.uri_template for t in templates}
    more_prompts, more_resources, more_templates = list(prompts), list(resources), list(templates)
    for upstream in rows:
        found = published_extras.published(upstream, published_extras.Taken(names, uris, uri_templates))
        more_prompts += found.prompts
        more_resources += found.resources
        more_templates += found.templates
        names |= {p.name for p in found.prompts}
        uris |= {r.uri for r in found.resources}
        uri_templates |= {t.uri_template for t in found.templates}
    return tuple(more_prompts), tuple(more_resources), tuple(more_templates)


def _resolved(tool: ToolDef, upstream: Upstream, task: str = "forbidden", automatic: bool = False) -> ToolDef:
    """An upstream tool with its typed reference to its upstream (AMB-310), and its MCP Apps UI resource
    named by the URI the tenant publishes it under (AMB-191). ``task``: how the upstream runs it
    (AMB-199); a tool it runs as a task, its own task support left automatic, is "optional" for our
    clients: we can run it either way (AMB-200)."""
    return dataclasses.replace(
        tool,
        handler_config={TASK_KEY: task, **tool.handler_config},
        upstream=upstream.ref(str(tool.handler_config.get("tool") or "")),
        meta=upstream_uris.published_meta(upstream.prefix, tool.meta),
        task_support="optional" if automatic and task != "forbidden" else tool.task_support,
    )


async def get_catalog(tenant_id: int) -> Catalog:
    """Return the tenant's enabled definitions, loading them only when the change token moved."""
    token = await tokens.current_version(tenant_id)
    with _lock:
        cached = _catalogs.get(tenant_id)
    if cached is not None and cached[0] == token:
        return cached[1]
    catalog = await database_sync_to_async(_load_catalog)(tenant_id)
    with _lock:
        _catalogs[tenant_id] = (token, catalog)
    return catalog
