"""initialize, ping and notifications/initialized (LC-02..09); server/discover (2026-07-28)."""

from __future__ import annotations

from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.core import ui_apps
from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog
from mcp_app.core.versions import ALL_VERSIONS, V2025_03_26, V2025_11_25, negotiate
from mcp_app.protocol import shaping, tasks
from mcp_app.protocol.jsonrpc import InvalidParams, InvalidRequest


def capabilities(version: str) -> dict[str, Any]:
    """Declare every feature for every tenant, even with none defined yet (AMB-19)."""
    caps: dict[str, Any] = {
        "logging": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
    }
    if version >= V2025_03_26:
        caps["completions"] = {}  # 2024-11-05 has completion/complete but no capability for it
    return caps


def modern_capabilities(catalog: Catalog) -> dict[str, Any]:
    """What this tenant offers now (2026-07-28 server/discover): a primitive only when it has one.

    Unlike initialize (AMB-19) the answer is cacheable and re-asked, so it can be exact; a client on
    `subscriptions/listen` still hears of the first tool, prompt or resource an editor adds.
    """
    caps: dict[str, Any] = {"logging": {}}  # messages reach a request that asks with its logLevel
    if catalog.tools:
        caps["tools"] = {"listChanged": True}
    if catalog.prompts:
        caps["prompts"] = {"listChanged": True}
    if catalog.resources or catalog.templates:
        caps["resources"] = {"subscribe": True, "listChanged": True}
    if catalog.prompts or catalog.templates:
        caps["completions"] = {}
    if tasks.modern_extension(catalog):
        caps["extensions"] = {tasks.EXTENSION: {}}
    if has_apps(catalog):
        caps["extensions"] = {**caps.get("extensions", {}), **apps_extension()}
    return caps


def has_apps(catalog: Catalog) -> bool:
    """Whether the tenant serves an MCP App: a tool linked to a ui:// resource, or such a resource."""
    return any(ui_apps.resource_uri(t.meta) for t in catalog.tools) or any(
        ui_apps.is_app_uri(r.uri) for r in catalog.resources
    )


def apps_extension() -> dict[str, Any]:
    """The MCP Apps extension as this server declares it (AMB-274): the app MIME type it serves."""
    return {ui_apps.EXTENSION: {"mimeTypes": [ui_apps.MIME_TYPE]}}


def server_info(ctx: RequestContext, version: str) -> dict[str, Any]:
    tenant = ctx.tenant
    info = {
        "name": tenant.name or tenant.slug,
        "version": tenant.server_version or "1.0.0",
        "title": tenant.title,
        "description": tenant.description,
        "websiteUrl": tenant.website_url,
        "icons": list(tenant.icons),
    }
    return shaping.server_info(info, version)


def _check_params(params: dict[str, Any]) -> None:
    if not isinstance(params.get("protocolVersion"), str):
        raise InvalidParams('initialize needs "protocolVersion" (a string).')
    if not isinstance(params.get("capabilities"), dict):
        raise InvalidParams('initialize needs "capabilities" (an object).')
    client = params.get("clientInfo")
    if not isinstance(client, dict):
        raise InvalidParams('initialize needs "clientInfo" (an object with "name" and "version").')
    if not isinstance(client.get("name"), str) or not isinstance(client.get("version"), str):
        raise InvalidParams('"clientInfo" needs "name" and "version" (strings).')


async def handle_initialize(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Negotiate the version and describe the tenant's server; the transport creates the session."""
    if ctx.session is not None:
        # A live session already agreed on a version (AMB-6): a client that wants another starts
        # a new session without Mcp-Session-Id.
        raise InvalidRequest("Session already initialized.")
    _check_params(params)
    version = negotiate(params["protocolVersion"])
    caps = capabilities(version)
    # Unlike the rest (AMB-19), tasks are declared only where a tool can be one: a client told so
    # would otherwise send task-augmented calls that every tool refuses.
    if version == V2025_11_25 and ctx.tenant.has_task_tools:
        caps["tasks"] = tasks.legacy_capability()
    # MCP Apps to a client that declared it (AMB-274); like the rest, whatever the tenant has today.
    if ui_apps.client_supports(params["capabilities"]):
        caps["extensions"] = apps_extension()
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": caps,
        "serverInfo": server_info(ctx, version),
    }
    if ctx.tenant.instructions:
        result["instructions"] = ctx.tenant.instructions
    return result


async def handle_discover(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Every revision served here, what the tenant offers, its instructions (2026-07-28 server/discover).

    The server's identity travels in `_meta` like on every modern result (the dispatcher adds it).
    """
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    result: dict[str, Any] = {
        "supportedVersions": list(ALL_VERSIONS),
        "capabilities": modern_capabilities(catalog),
    }
    if ctx.tenant.instructions:
        result["instructions"] = ctx.tenant.instructions
    return result


async def handle_ping(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Answer at once with an empty result, at any time (LC-09, UT-01)."""
    return {}


async def handle_initialized(ctx: RequestContext, params: dict[str, Any]) -> None:
    """Mark the session ready for server-initiated requests (LC-08, LC-10)."""
    if ctx.session is not None:
        ctx.session.initialized = True
