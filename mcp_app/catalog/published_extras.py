"""An upstream's pinned prompts, resources and resource templates as the tenant publishes them (AMB-190..192).

One mapping from the pinned wire dicts on the Upstream row to the catalog's definitions, used by the
catalog loader (what clients are served) and the admin (what the owner sees published): the prefix
put on prompt names, the URIs rewritten by core/upstream_uris.py, and what cannot be published left
out with the reason (a URI without a scheme, a name or URI the tenant's own definitions already use).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from mcp_app.core import upstream_uris
from mcp_app.core.types import PromptDef, ResourceDef, TemplateDef, UpstreamRef
from mcp_app.models.upstreams import Upstream, extras_by_key

logger = logging.getLogger(__name__)

# A published definition has no row of its own: its id says "none" to code that keys on ids.
NO_ROW = 0


@dataclass
class Published:
    """One upstream's published extras, and what was left out (published name or remote one → why)."""

    prompts: list[PromptDef] = field(default_factory=list)
    resources: list[ResourceDef] = field(default_factory=list)
    templates: list[TemplateDef] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Taken:
    """The tenant's own prompt names, resource URIs and URI templates: they win a collision."""

    prompts: Collection[str] = ()
    resources: Collection[str] = ()
    templates: Collection[str] = ()


def _text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    return value if isinstance(value, str) else ""


def _dict(item: dict[str, Any], key: str) -> dict[str, Any]:
    value = item.get(key)
    return value if isinstance(value, dict) else {}


def _list(item: dict[str, Any], key: str) -> list[Any]:
    value = item.get(key)
    return value if isinstance(value, list) else []


# Per list: the tenant's definitions it collides with (a `Taken` field), what the collision is told as,
# and what an item's remote URI without a scheme is told as (prompts are named, not put under a scheme).
_KINDS = {
    "prompts": ("prompts", "the tenant has a prompt of that name", ""),
    "resources": (
        "resources",
        "the tenant has a resource of that URI",
        "its URI has no scheme:// to put the prefix after",
    ),
    "resourceTemplates": (
        "templates",
        "the tenant has a resource template of that URI template",
        "its URI template has no scheme:// to put the prefix after",
    ),
}


def published(upstream: Upstream, taken: Taken = Taken()) -> Published:
    """What of ``upstream``'s pinned extras clients see (nothing for a kind whose switch is off)."""
    out = Published()
    pinned = upstream.pinned_extras or {}
    for kind, (field_name, collision, no_scheme) in _KINDS.items():
        for remote, item in extras_by_key(kind, pinned.get(kind)).items():
            key = (
                f"{upstream.prefix}{remote}"
                if kind == "prompts"
                else upstream_uris.published(upstream.prefix, remote)
            )
            if key is None:
                why, what = no_scheme, remote
            elif key in getattr(taken, field_name):
                why, what = collision, key
            else:
                size = item.get("size") if kind == "resources" else None
                getattr(out, field_name).append(_definition(kind, key, item, upstream.ref(remote, size)))
                continue
            out.left_out[what] = why
            logger.info(
                "upstream %s of tenant %s: %s left out: %s", upstream.pk, upstream.tenant_id, what, why
            )
    return out


def _definition(
    kind: str, key: str, item: dict[str, Any], ref: UpstreamRef
) -> PromptDef | ResourceDef | TemplateDef:
    """The catalog's definition of one pinned item, published as ``key`` (a name, URI or URI template)."""
    common: dict[str, Any] = {
        "id": NO_ROW,
        "title": _text(item, "title"),
        "description": _text(item, "description"),
        "icons": _list(item, "icons"),
        "meta": _dict(item, "_meta"),
    }
    if kind == "prompts":
        arguments = [a for a in _list(item, "arguments") if isinstance(a, dict)]
        return PromptDef(name=key, arguments=arguments, messages=[], upstream=ref, **common)
    more: dict[str, Any] = {
        "name": _text(item, "name") or ref.remote,
        "mime_type": _text(item, "mimeType"),
        "annotations": _dict(item, "annotations"),
        **common,
    }
    if kind == "resources":
        return ResourceDef(uri=key, text="", blob=None, upstream=ref, **more)
    return TemplateDef(
        uri_template=key, handler="upstream", handler_config={}, completions={}, upstream=ref, **more
    )
