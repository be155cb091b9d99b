"""How an upstream's resource URIs are published under its prefix, and back (AMB-191).

The one place that knows the rewrite: the catalog publishes with it, the protocol reverses it to ask
the upstream, and the answers (contents, links in prompt messages, a tool's MCP Apps `_meta`) are
rewritten with it again. `scheme://rest` is published as `scheme://<prefix>/rest` (FastMCP's "path"
format): the scheme is kept, so a client that dispatches on it (an MCP Apps host on `ui://`) still
does, and two upstreams with the same URIs but different prefixes never collide. An empty prefix
publishes the upstream's URIs as they are. A URI (or template) without a `scheme://` has no place
to put the prefix: it is not published (the caller logs it).
"""

from __future__ import annotations

import re
from typing import Any

from mcp_app.core import ui_apps

# RFC 3986's scheme; a template whose scheme is an expression (`{+base}...`) has none we can keep.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
SEPARATOR = "://"
# Where MCP Apps (modelcontextprotocol/ext-apps) names a tool's UI resource: `_meta.ui.resourceUri`,
# and the older flat key the first hosts read (core/ui_apps.py, AMB-272).
UI_KEY, UI_URI_KEY, LEGACY_UI_KEY = ui_apps.UI_KEY, ui_apps.UI_URI_KEY, ui_apps.LEGACY_UI_KEY


def _split(uri: str) -> tuple[str, str] | None:
    scheme, separator, rest = uri.partition(SEPARATOR)
    if not separator or not _SCHEME.match(scheme):
        return None
    return scheme, rest


def published(prefix: str, uri: str) -> str | None:
    """The URI (or URI template) clients see for the upstream's ``uri``; None: it cannot be published."""
    parts = _split(uri)
    if parts is None:
        return None
    if not prefix:
        return uri
    scheme, rest = parts
    return f"{scheme}{SEPARATOR}{prefix}/{rest}"


def remote(prefix: str, uri: str) -> str | None:
    """The upstream's URI for a published ``uri``; None when ``uri`` is not one of this prefix's."""
    parts = _split(uri)
    if parts is None:
        return None
    if not prefix:
        return uri
    scheme, rest = parts
    head = f"{prefix}/"
    if not rest.startswith(head):
        return None
    return f"{scheme}{SEPARATOR}{rest[len(head) :]}"


def _or_same(prefix: str, uri: Any) -> Any:
    # A URI in an answer that cannot be published is passed on as the upstream wrote it: dropping the
    # block would change the message, and such a URI was never one a client could read through us.
    if not isinstance(uri, str):
        return uri
    found = published(prefix, uri)
    return uri if found is None else found


def published_meta(prefix: str, meta: Any) -> Any:
    """A definition's `_meta` with its MCP Apps UI resource URI published (a copy; others untouched)."""
    if not isinstance(meta, dict) or not prefix:
        return meta
    out = dict(meta)
    ui = out.get(UI_KEY)
    if isinstance(ui, dict) and isinstance(ui.get(UI_URI_KEY), str):
        out[UI_KEY] = {**ui, UI_URI_KEY: _or_same(prefix, ui[UI_URI_KEY])}
    if isinstance(out.get(LEGACY_UI_KEY), str):
        out[LEGACY_UI_KEY] = _or_same(prefix, out[LEGACY_UI_KEY])
    return out


def published_contents(prefix: str, contents: Any) -> Any:
    """One ResourceContents of the upstream's answer, its `uri` published."""
    if not isinstance(contents, dict) or "uri" not in contents:
        return contents
    return {**contents, "uri": _or_same(prefix, contents["uri"])}


def published_block(prefix: str, block: Any) -> Any:
    """A content block of the upstream's answer: a resource link's or an embedded resource's URI published."""
    if not isinstance(block, dict):
        return block
    if block.get("type") == "resource_link" and "uri" in block:
        return {**block, "uri": _or_same(prefix, block["uri"])}
    if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
        return {**block, "resource": published_contents(prefix, block["resource"])}
    return block
