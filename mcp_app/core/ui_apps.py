"""MCP Apps, the `io.modelcontextprotocol/ui` extension (ext-apps, stable 2026-01-26): the one place
that reads its shapes (AMB-272).

An app is an HTML resource at a `ui://` URI with the MIME type `text/html;profile=mcp-app`; a tool
names it in `_meta.ui.resourceUri` (the older flat `_meta["ui/resourceUri"]` is still read), and may
say who sees it in `_meta.ui.visibility`: `["model", "app"]` by default, `["app"]` for a tool only the
app calls. A client (host) declares support in its capabilities:
`extensions: {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
SCHEME = "ui://"
UI_KEY = "ui"
UI_URI_KEY = "resourceUri"
LEGACY_UI_KEY = "ui/resourceUri"  # deprecated by the extension, "removed before GA"
VISIBILITY_KEY = "visibility"
VISIBILITIES = ("model", "app")
# The keys of a resource's `_meta.ui.csp` (each a list of origins).
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
NONE, SELF = "'none'", "'self'"


def is_app_uri(uri: Any) -> bool:
    return isinstance(uri, str) and uri.startswith(SCHEME)


def is_app_mime_type(mime_type: Any) -> bool:
    """The extension's MIME type, its parameter's spacing and case aside."""
    if not isinstance(mime_type, str):
        return False
    kind, _, parameters = mime_type.partition(";")
    return kind.strip().lower() == "text/html" and parameters.replace(" ", "").lower() == "profile=mcp-app"


def ui_meta(meta: Any) -> dict[str, Any]:
    ui = meta.get(UI_KEY) if isinstance(meta, Mapping) else None
    return ui if isinstance(ui, dict) else {}


def resource_uri(meta: Any) -> Any:
    """The tool's app resource as written (`_meta.ui.resourceUri`, else the flat key); None: no app."""
    found = ui_meta(meta).get(UI_URI_KEY)
    if found is None and isinstance(meta, Mapping):
        found = meta.get(LEGACY_UI_KEY)
    return found


def app_only(meta: Any) -> bool:
    """Whether the tool is for its app alone: a visibility list without "model"."""
    visibility = ui_meta(meta).get(VISIBILITY_KEY)
    return isinstance(visibility, list) and "model" not in visibility


def client_supports(capabilities: Any) -> bool:
    """Whether the client's capabilities declare the extension with the app MIME type."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    declared = extensions.get(EXTENSION) if isinstance(extensions, Mapping) else None
    if not isinstance(declared, Mapping):
        return False
    mime_types = declared.get("mimeTypes")
    return isinstance(mime_types, list) and any(is_app_mime_type(m) for m in mime_types)


def with_support(capabilities: Mapping[str, Any] | None) -> dict[str, Any]:
    """These client capabilities, declaring the extension too (a client that plays the host)."""
    capabilities = dict(capabilities or {})
    extensions = capabilities.get("extensions")
    extensions = dict(extensions) if isinstance(extensions, Mapping) else {}
    capabilities["extensions"] = {**extensions, EXTENSION: {"mimeTypes": [MIME_TYPE]}}
    return capabilities


def meta_problems(meta: Any) -> list[str]:
    """A tool's `_meta.ui` as the extension defines it; every problem in plain words."""
    if not isinstance(meta, Mapping):
        return []
    problems: list[str] = []
    if UI_KEY in meta and not isinstance(meta[UI_KEY], dict):
        return ['_meta "ui" must be an object: {"resourceUri": "ui://…", "visibility": ["model", "app"]}.']
    uri = resource_uri(meta)
    if uri is not None and not is_app_uri(uri):
        problems.append(
            f"_meta ui.resourceUri must name a ui:// resource (an MCP App), not {str(uri)[:200]!r}."
        )
    visibility = ui_meta(meta).get(VISIBILITY_KEY)
    if visibility is not None:
        if (
            not isinstance(visibility, list)
            or not visibility
            or any(v not in VISIBILITIES for v in visibility)
            or len(set(visibility)) != len(visibility)
        ):
            problems.append(
                '_meta ui.visibility must be a list of "model" and/or "app", each once: ["model", "app"] '
                '(the default), ["model"], or ["app"] for a tool only its app calls.'
            )
        elif uri is None and "model" not in visibility:
            problems.append(
                'A tool only its app calls (ui.visibility ["app"]) needs ui.resourceUri: the app.'
            )
    return problems


def resource_meta_problems(meta: Any) -> list[str]:
    """An app resource's `_meta.ui.csp`: each key a list of origins."""
    csp = ui_meta(meta).get("csp")
    if csp is None:
        return []
    if not isinstance(csp, dict):
        return ['_meta ui.csp must be an object of origin lists ("connectDomains", "resourceDomains", …).']
    problems = [
        f'_meta ui.csp has no key "{key}" (known: {", ".join(CSP_KEYS)}).'
        for key in csp
        if key not in CSP_KEYS
    ]
    for key in CSP_KEYS:
        value = csp.get(key)
        if value is not None and not (isinstance(value, list) and all(_origin(v) for v in value)):
            problems.append(
                f'_meta ui.csp.{key} must be a list of origins such as "https://api.example.com".'
            )
    return problems


def _origin(value: Any) -> bool:
    """An origin a CSP source list can hold: a scheme and host, no spaces, quotes or semicolons."""
    return (
        isinstance(value, str)
        and "://" in value
        and not any(c in value for c in " ;,'\"")
        and len(value) <= 300
    )


def content_security_policy(meta: Any) -> str:
    """The policy the extension has a host build for an app from its `_meta.ui.csp` ("Security")."""
    csp = ui_meta(meta).get("csp")
    csp = csp if isinstance(csp, dict) else {}

    def extra(key: str) -> str:
        value = csp.get(key)
        return " ".join(v for v in value if _origin(v)) if isinstance(value, list) else ""

    resources, connect = extra("resourceDomains"), extra("connectDomains")
    directives = [
        "default-src 'none'",
        f"script-src 'self' 'unsafe-inline' {resources}",
        f"style-src 'self' 'unsafe-inline' {resources}",
        f"connect-src 'self' {connect}" if connect else "connect-src 'none'",
        f"img-src 'self' data: {resources}",
        f"font-src 'self' {resources}",
        f"media-src 'self' data: {resources}",
        f"frame-src {extra('frameDomains') or NONE}",
        "object-src 'none'",
        f"base-uri {extra('baseUriDomains') or SELF}",
    ]
    return "; ".join(" ".join(d.split()) for d in directives)
