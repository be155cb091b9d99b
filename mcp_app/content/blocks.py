"""Turn content specs stored on definitions into MCP content blocks.

Spec shapes (each may carry ``annotations`` {audience, priority, lastModified} and ``_meta``):

- ``{"type": "text", "text": "<Django template>"}`` → text block rendered with the variables;
- ``{"type": "image"|"audio", "data": "<base64>", "mimeType": ...}`` or
  ``{"type": "image"|"audio", "resource": "<uri of a tenant blob resource>"}``;
- ``{"type": "resource_link", "uri": ...}`` → name/title/description/mimeType/size from the tenant's
  resource, or given explicitly in the spec (then the uri need not be a tenant resource);
- ``{"type": "resource", "uri": ...}`` → the tenant resource embedded (text or blob).

Their shape is checked when a definition is saved, by the ``content_spec`` schema of
``fields.schema.json`` (content/fields.py); the checks here only keep a bad spec off the wire.
Text is rendered by ``rendering`` (inline or in a render process) in the sandbox (``sandbox``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from mcp_app.content import rendering
from mcp_app.core import ui_apps
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ContentError
from mcp_app.core.types import ResourceDef

_ANNOTATION_KEYS = ("audience", "priority", "lastModified")
_MEDIA_TYPES = ("image", "audio")
BLOCK_TYPES = ("text", "image", "audio", "resource_link", "resource")


def _annotations(spec: dict[str, Any], fallback: dict[str, Any] | None = None) -> dict[str, Any] | None:
    given = spec.get("annotations")
    if given is None:
        given = fallback or {}
    if not isinstance(given, dict):
        raise ContentError("Content annotations must be an object.")
    picked = {k: given[k] for k in _ANNOTATION_KEYS if k in given}
    return picked or None


def _finish(
    block: dict[str, Any], spec: dict[str, Any], fallback: dict[str, Any] | None = None
) -> dict[str, Any]:
    annotations = _annotations(spec, fallback)
    if annotations:
        block["annotations"] = annotations
    if isinstance(spec.get("_meta"), dict):
        block["_meta"] = spec["_meta"]
    return block


def resource_contents(resource: ResourceDef, uri: str | None = None) -> dict[str, Any]:
    """Return the ResourceContents dict of a tenant resource (text or base64 blob)."""
    contents: dict[str, Any] = {"uri": uri or resource.uri}
    if resource.mime_type:
        contents["mimeType"] = resource.mime_type
    if resource.blob is not None:
        contents["blob"] = base64.b64encode(resource.blob).decode("ascii")
    else:
        contents["text"] = resource.text
    if resource.meta and ui_apps.is_app_uri(resource.uri):
        # MCP Apps: the host builds the app's CSP from the contents' `_meta.ui.csp` (AMB-272).
        contents["_meta"] = resource.meta
    return contents


def _lookup(resources: Mapping[str, ResourceDef], uri: Any) -> ResourceDef:
    if not isinstance(uri, str) or not uri:
        raise ContentError("A content block that refers to a resource needs its uri.")
    try:
        resource = resources[uri]
    except KeyError:
        raise ContentError(f"Unknown resource {uri!r}.") from None
    if resource.upstream is not None:
        # Its contents live upstream and are read per request: a definition can link to it, not embed it.
        raise ContentError(
            f"Resource {uri!r} is served by upstream server {resource.upstream.name!r}: link to it instead."
        )
    return resource


def _media_block(spec: dict[str, Any], kind: str, resources: Mapping[str, ResourceDef]) -> dict[str, Any]:
    data: Any  # base64 text: checked below when the definition gave it
    mime: Any
    if "resource" in spec:
        resource = _lookup(resources, spec["resource"])
        if resource.blob is None:
            raise ContentError(f"Resource {resource.uri!r} has no binary content for an {kind} block.")
        data = base64.b64encode(resource.blob).decode("ascii")
        mime = spec.get("mimeType") or resource.mime_type
    else:
        data, mime = spec.get("data"), spec.get("mimeType")
        if not isinstance(data, str) or not data:
            raise ContentError(f"An {kind} block needs base64 'data' or a 'resource' uri.")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ContentError(f"The {kind} block's data is not valid base64.") from None
    if not isinstance(mime, str) or not mime:
        raise ContentError(f"An {kind} block needs a mimeType.")
    return _finish({"type": kind, "data": data, "mimeType": mime}, spec)


async def _uri(ctx: RequestContext, spec: dict[str, Any], variables: dict[str, Any]) -> Any:
    uri = spec.get("uri")
    return await rendering.text(ctx, uri, variables) if isinstance(uri, str) else uri


async def _link_block(
    ctx: RequestContext, spec: dict[str, Any], variables: dict[str, Any], resources: Mapping[str, ResourceDef]
) -> dict[str, Any]:
    uri = await _uri(ctx, spec, variables)
    resource = resources.get(uri) if isinstance(uri, str) else None
    if resource is None and not spec.get("name"):
        # Unknown URI and nothing to describe it with: almost surely a typo in the definition.
        _lookup(resources, uri)
    block: dict[str, Any] = {"type": "resource_link", "uri": uri}
    # Without a name the URI is a known resource's (_lookup refused an unknown one above).
    block["name"] = spec.get("name") or (resource.name if resource is not None else "")
    for key, attr in (("title", "title"), ("description", "description"), ("mimeType", "mime_type")):
        value = spec.get(key) or (getattr(resource, attr) if resource else "")
        if value:
            block[key] = value
    if "size" in spec:
        block["size"] = spec["size"]
    elif resource is not None and resource.size is not None:
        block["size"] = resource.size
    return _finish(block, spec, resource.annotations if resource else None)


async def _render_one(
    ctx: RequestContext, spec: Any, variables: dict[str, Any], resources: Mapping[str, ResourceDef]
) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ContentError("Each content entry must be an object with a 'type'.")
    kind = spec.get("type")
    if kind == "text":
        source = spec.get("text")
        if not isinstance(source, str):
            raise ContentError("A text block needs a 'text' string.")
        return _finish({"type": "text", "text": await rendering.text(ctx, source, variables)}, spec)
    if kind in _MEDIA_TYPES:
        return _media_block(spec, kind, resources)
    if kind == "resource_link":
        return await _link_block(ctx, spec, variables, resources)
    if kind == "resource":
        resource = _lookup(resources, await _uri(ctx, spec, variables))
        return _finish({"type": "resource", "resource": resource_contents(resource)}, spec)
    raise ContentError(f"Unknown content type {kind!r}; use one of: {', '.join(BLOCK_TYPES)}.")


def _needs_resources(specs: list[Any]) -> bool:
    return any(
        isinstance(s, dict) and (s.get("type") in ("resource_link", "resource") or "resource" in s)
        for s in specs
    )


async def render_blocks(ctx: RequestContext, specs: list[dict], variables: dict) -> list[dict]:
    """Return MCP content blocks for ``specs`` rendered with ``variables``; ContentError on bad specs."""
    if not isinstance(specs, list):
        raise ContentError("The content must be a list of content blocks.")
    resources = await ctx.resources() if _needs_resources(specs) else {}
    return [await _render_one(ctx, spec, variables, resources) for spec in specs]
