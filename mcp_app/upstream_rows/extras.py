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
from mcp_app.upstream_rows.models import Upstream, extras_by_key

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


def published(upstream: Upstream, taken: Taken = Taken()) -> Published:
    """What of ``upstream``'s pinned extras clients see (nothing for a kind whose switch is off)."""
    out = Published()
    pinned = upstream.pinned_extras or {}
    completions = "completions" in (upstream.last_capabilities or {})

    def ref(remote: str, size: Any = None) -> UpstreamRef:
        return UpstreamRef(
            name=upstream.name,
            upstream_id=upstream.pk,
            url=upstream.url,
            mode=upstream.mode,
            transport=upstream.transport,
            timeout_seconds=upstream.timeout_seconds,
            prefix=upstream.prefix,
            remote=remote,
            secrets=upstream.secret_headers,
            oauth=tuple(sorted(upstream.oauth().items())),
            connection=upstream.connection,
            completions=completions,
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )

    def leave_out(what: str, why: str) -> None:
        out.left_out[what] = why
        logger.info("upstream %s of tenant %s: %s left out: %s", upstream.pk, upstream.tenant_id, what, why)

    for remote, item in extras_by_key("prompts", pinned.get("prompts")).items():
        name = f"{upstream.prefix}{remote}"
        if name in taken.prompts:
            leave_out(name, "the tenant has a prompt of that name")
            continue
        arguments = [a for a in _list(item, "arguments") if isinstance(a, dict)]
        out.prompts.append(
            PromptDef(
                id=NO_ROW,
                name=name,
                title=_text(item, "title"),
                description=_text(item, "description"),
                arguments=arguments,
                messages=[],
                icons=_list(item, "icons"),
                meta=_dict(item, "_meta"),
                upstream=ref(remote),
            )
        )
    for remote, item in extras_by_key("resources", pinned.get("resources")).items():
        uri = upstream_uris.published(upstream.prefix, remote)
        if uri is None:
            leave_out(remote, "its URI has no scheme:// to put the prefix after")
        elif uri in taken.resources:
            leave_out(uri, "the tenant has a resource of that URI")
        else:
            out.resources.append(
                ResourceDef(
                    id=NO_ROW,
                    uri=uri,
                    name=_text(item, "name") or remote,
                    title=_text(item, "title"),
                    description=_text(item, "description"),
                    mime_type=_text(item, "mimeType"),
                    text="",
                    blob=None,
                    annotations=_dict(item, "annotations"),
                    icons=_list(item, "icons"),
                    meta=_dict(item, "_meta"),
                    upstream=ref(remote, item.get("size")),
                )
            )
    for remote, item in extras_by_key("resourceTemplates", pinned.get("resourceTemplates")).items():
        uri_template = upstream_uris.published(upstream.prefix, remote)
        if uri_template is None:
            leave_out(remote, "its URI template has no scheme:// to put the prefix after")
        elif uri_template in taken.templates:
            leave_out(uri_template, "the tenant has a resource template of that URI template")
        else:
            out.templates.append(
                TemplateDef(
                    id=NO_ROW,
                    uri_template=uri_template,
                    name=_text(item, "name") or remote,
                    title=_text(item, "title"),
                    description=_text(item, "description"),
                    mime_type=_text(item, "mimeType"),
                    handler="upstream",
                    handler_config={},
                    completions={},
                    annotations=_dict(item, "annotations"),
                    icons=_list(item, "icons"),
                    meta=_dict(item, "_meta"),
                    upstream=ref(remote),
                )
            )
    return out
