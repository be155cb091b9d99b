"""A listed tenant as the registry describes a server: its server.json, and the entry a list holds (AMB-372).

What the schema lets a hosted server say (tests/registry/schemas/, the registry's 2025-09-29 server.json):
its name (names.py), a description of at most 100 characters, its title, its version (the tenant's
``server_version``: the registry keeps versions, the platform serves one, the current), its website (the
tenant's, else its connect page), its icons (those the schema allows), and one ``remotes`` entry: the
tenant's MCP URL over streamable-http. Where the tenant requires OAuth, the schema has no field for it: a
remote's ``headers`` would make clients ask the person for a token instead of running OAuth, so the remote
names none, and the publisher-provided ``_meta`` (the schema's one open object) says OAuth 2.1 is required
and where the RFC 9728 metadata is, which an MCP client also finds from the endpoint's 401.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from mcp_app.registry import names
from tenants.models import AuthMode, Tenant

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"
PUBLISHER_META = "io.modelcontextprotocol.registry/publisher-provided"
OFFICIAL_META = "io.modelcontextprotocol.registry/official"
MAX_TEXT = 100
_ICON_TYPES = frozenset({"image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/webp"})
_ICON_SIZE = re.compile(r"^(\d+x\d+|any)$")


def mcp_url(tenant: Tenant) -> str:
    return f"{settings.MCP_PUBLIC_URL}/t/{tenant.slug}/mcp"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1].rstrip() + "…"


def _icons(icons: Any) -> list[dict[str, Any]]:
    """The tenant's icons the schema allows (https, at most 255 characters); others left out, not fixed."""
    kept = []
    for icon in icons if isinstance(icons, list) else []:
        if not isinstance(icon, dict):
            continue
        src = icon.get("src")
        if not isinstance(src, str) or not src.startswith("https://") or len(src) > 255:
            continue
        out: dict[str, Any] = {"src": src}
        if icon.get("mimeType") in _ICON_TYPES:
            out["mimeType"] = icon["mimeType"]
        sizes = icon.get("sizes")
        if (
            isinstance(sizes, list)
            and sizes
            and all(isinstance(s, str) and _ICON_SIZE.match(s) for s in sizes)
        ):
            out["sizes"] = sizes
        if icon.get("theme") in ("light", "dark"):
            out["theme"] = icon["theme"]
        kept.append(out)
    return kept


def server_json(tenant: Tenant) -> dict[str, Any]:
    """The tenant's server.json (the schema's ServerDetail)."""
    title = _short(tenant.title or tenant.name)
    document: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "name": names.server_name(tenant.slug),
        "title": title,
        "description": _short(tenant.description) or title,
        "version": tenant.server_version,
        "websiteUrl": tenant.website_url or f"{settings.MCP_PUBLIC_URL}/t/{tenant.slug}/connect",
        "remotes": [{"type": "streamable-http", "url": mcp_url(tenant)}],
    }
    if icons := _icons(tenant.icons):
        document["icons"] = icons
    if tenant.auth_mode == AuthMode.OAUTH:
        metadata = f"{settings.MCP_PUBLIC_URL}/.well-known/oauth-protected-resource/t/{tenant.slug}/mcp"
        document["_meta"] = {
            PUBLISHER_META: {"authorization": {"required": "oauth2.1", "protectedResourceMetadata": metadata}}
        }
    return document


def _timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry(tenant: Tenant) -> dict[str, Any]:
    """The tenant as a list or version answer holds it (ServerResponse): its server.json and the registry's marks."""
    return {
        "server": server_json(tenant),
        "_meta": {
            OFFICIAL_META: {
                "status": "active",
                "publishedAt": _timestamp(tenant.created_at),
                "updatedAt": _timestamp(tenant.updated_at),
                # One version is served: the current one is always the latest.
                "isLatest": True,
            }
        },
    }
