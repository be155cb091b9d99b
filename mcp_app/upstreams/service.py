"""An upstream's tools in our catalog: discover and sync, publish and unpublish, diff and accept.

Pinned definitions (AMB-161): a published upstream tool is a `Tool` row holding the definition the
owner published; `UpstreamTool.offered` is what the upstream offers now and `pinned` what was
published or last accepted. A sync only ever writes `offered` (and the seen/gone marks), so a
changed remote description or schema never reaches clients on its own: it waits as a diff until
`accept` applies it, field by field, to what the owner did not override. Every change to a Tool goes
through full_clean + save, so history, audit, the version bump and list_changed follow as for any
edit. A tool the upstream stopped offering has its published tool disabled, and enabled again when
it comes back (AMB-162). Callers set the tenant wall's scope (tenants/wall.py); nothing here reads
a request.

Longer than 400 lines: sync, publish, diff and accept are one row's life, and the helpers they share
(`_derived`, `_save_tool`) would make any split of them a cycle.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from mcp_app import federation
from mcp_app.handlers import secrets, upstream_target
from mcp_app.history import service as history
from mcp_app.models import Tool, Upstream, UpstreamTool
from mcp_app.models.upstreams import REVIEWED_FIELDS
from mcp_app.upstreams import extras_review

# A published tool's own timeout leaves the federation's per-call timeout room to answer first, so
# the client reads "the upstream did not answer in N s" rather than a bare timeout.
TIMEOUT_MARGIN_SECONDS = 5
# A Tool field per reviewed field of a remote definition.
TOOL_FIELDS = {
    "title": "title",
    "description": "description",
    "inputSchema": "input_schema",
    "outputSchema": "output_schema",
    "annotations": "annotations",
    "_meta": "meta",
}
# `_meta` keys a Tool row may hold (content/fields.schema.json's `meta`): the others (a prefix MCP
# reserves, a malformed key) are the upstream's protocol business, and would make the tool unsavable.
_META_KEY = re.compile(
    r"^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/)?"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$"
)
_RESERVED_META = re.compile(
    r"^(?:[A-Za-z0-9-]+\.)*(?:modelcontextprotocol|mcp)\.[A-Za-z0-9-]+/", re.IGNORECASE
)


class UpstreamProblem(Exception):
    """Why a publish or an accept did not happen, in words for the owner."""


@dataclass
class SyncReport:
    """What one sync found: remote names per outcome, and the new tools it could not publish."""

    new: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    back: list[str] = field(default_factory=list)
    not_published: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FieldDiff:
    """One reviewed field whose offered value is not the pinned one."""

    name: str
    pinned: Any
    offered: Any
    # (kind, text): "-" pinned only, "+" offered only, " " both, "@" a hunk header.
    lines: list[tuple[str, str]]
    # Whether accepting leaves this field of the published tool as the owner set it.
    overridden: bool


def target(upstream: Upstream) -> federation.Target:
    """The federation target of the owner's own exchanges with an upstream row (discovery, sync, the
    watcher, the self-check): its own credentials, never a caller's (handlers/upstream_target.py)."""
    try:
        return async_to_sync(upstream_target.target)(upstream.ref(), upstream.tenant_id)
    except secrets.SecretsError as exc:
        raise federation.UpstreamError(str(exc)) from None


def discover(upstream: Upstream) -> federation.Offering:
    """What the upstream offers now (Test connection); what it said is kept on the row as status."""
    try:
        offering = async_to_sync(federation.discover)(target(upstream))
    except federation.UpstreamError as exc:
        _record(upstream, last_error=exc.message)
        raise
    _record(
        upstream,
        last_protocol_version=offering.protocol_version,
        last_server_info=offering.server_info,
        last_capabilities=offering.capabilities,
        last_error="",
    )
    return offering


def _record(upstream: Upstream, **status: Any) -> None:
    # An update, not a save: status is no definition change (no version bump, no history).
    for name, value in status.items():
        setattr(upstream, name, value)
    Upstream.objects.filter(pk=upstream.pk).update(**status)


def sync(upstream: Upstream) -> SyncReport:
    """Discover the upstream's tools and record them (raises federation.UpstreamError when unreachable)."""
    offering = discover(upstream)
    report = apply_offering(upstream, offering.tools)
    _record(upstream, last_synced_at=timezone.now())
    extras_review.record_offered(upstream, offering)
    return report


# Remote tools recorded (and published) in one transaction. On SQLite one write transaction holds the
# whole database: a sync of thousands in one transaction made every other writer wait out its timeout
# (20 s) and fail with "database is locked" (docs/operations.md).
CHUNK = 100


def apply_offering(upstream: Upstream, tools: list[dict[str, Any]]) -> SyncReport:
    """Record the remote tools offered now: new, changed (held for review), gone, back.

    Committed CHUNK remote tools at a time, each chunk under a lock on the upstream's row (two syncs of
    one upstream take turns); what is gone is settled last, once every offered tool is recorded. A sync
    that fails half-way keeps the chunks it committed: the next sync finds the rest.
    """
    report = SyncReport()
    now = timezone.now()
    offered = {t["name"]: t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)}
    names = list(offered)
    # The remote names a tool a document imported may stand for: only those are looked for (two
    # queries a new remote tool otherwise, in a sync publishing thousands).
    importable = set(_unlinked(upstream.tenant_id).values_list("handler_config__tool", flat=True))
    for start in range(0, len(names), CHUNK):
        chunk = names[start : start + CHUNK]
        with transaction.atomic():
            Upstream.objects.select_for_update().filter(pk=upstream.pk).first()
            rows = {
                r.remote_name: r
                for r in UpstreamTool.objects.filter(upstream=upstream, remote_name__in=chunk)
            }
            for name in chunk:
                _apply_one(upstream, name, offered[name], rows.get(name), now, report, name in importable)
    with transaction.atomic():
        Upstream.objects.select_for_update().filter(pk=upstream.pk).first()
        for row in UpstreamTool.objects.filter(upstream=upstream, gone_at__isnull=True).select_related(
            "tool"
        ):
            if row.remote_name in offered:
                continue
            row.gone_at = now
            report.gone.append(row.remote_name)
            if row.tool is not None and row.tool.enabled:
                _save_tool(row.tool, "The upstream no longer offers it", enabled=False)
                row.withdrawn = True
            row.save()
    return report


def _apply_one(
    upstream: Upstream,
    name: str,
    definition: dict[str, Any],
    row: UpstreamTool | None,
    now: datetime,
    report: SyncReport,
    importable: bool,
) -> None:
    if row is None:
        row = UpstreamTool.objects.create(
            tenant_id=upstream.tenant_id,
            upstream=upstream,
            remote_name=name,
            offered=definition,
            last_seen_at=now,
        )
        report.new.append(name)
        if importable and (imported := _imported_tool(upstream, name)) is not None:
            _adopt(row, imported)
            report.published.append(name)
        elif upstream.publish_new:
            _publish_new(row, report)
        return
    if row.offered != definition:
        row.offered = definition
        if row.published:
            report.changed.append(name)
    row.last_seen_at = now
    if row.gone_at is not None:
        row.gone_at = None
        report.back.append(name)
        if row.withdrawn and row.tool is not None:
            _save_tool(row.tool, "The upstream offers it again", enabled=True)
        row.withdrawn = False
    row.save()


def _unlinked(tenant_id: int) -> QuerySet[Tool]:
    """The tenant's upstream tools no remote tool's row links yet."""
    return Tool.objects.filter(tenant_id=tenant_id, handler="upstream", upstream_tool__isnull=True)


def _imported_tool(upstream: Upstream, remote_name: str) -> Tool | None:
    """A published tool of this remote tool that no row links yet: one a tenant document brought
    (naming this upstream, or by a name no upstream had when it came: `Tool.take_upstream_name`)."""
    unlinked = _unlinked(upstream.tenant_id).filter(handler_config__tool=remote_name)
    found = unlinked.filter(upstream=upstream).order_by("pk").first()
    if found is None:
        found = (
            unlinked.filter(upstream__isnull=True, handler_config__upstream=upstream.name)
            .order_by("pk")
            .first()
        )
        if found is not None:
            found.save(update_fields=["handler_config", "upstream", "updated_at"])  # resolves its name
    return found


def _adopt(row: UpstreamTool, tool: Tool) -> None:
    """Link an imported tool to its remote tool, pinning the definition the document gave it (AMB-164).

    When what the upstream offers now gives the same fields, that is the pin; otherwise the tool's own
    fields are, so the difference waits for review like any change the upstream makes.
    """
    offered = row.offered
    fixed, defaults = _fixed(tool), _owner_defaults(tool, offered)
    derived = _derived(offered, fixed, defaults)
    if all(getattr(tool, name) == value for name, value in derived.items()):
        row.pinned = offered
    else:
        row.pinned = {
            "name": row.remote_name,
            "title": tool.title or None,
            "description": tool.description or None,
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema,
            "annotations": tool.annotations or None,
            "_meta": tool.meta or None,
        }
    row.tool = tool
    row.save(update_fields=["tool", "pinned"])


def _publish_new(row: UpstreamTool, report: SyncReport) -> None:
    try:
        with transaction.atomic():
            publish(row)
    except UpstreamProblem as exc:
        report.not_published[row.remote_name] = str(exc)
    else:
        report.published.append(row.remote_name)


def published_schema(schema: Any, fixed: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The remote input schema as our clients see it: fixed arguments gone, the owner's defaults set."""
    out = copy.deepcopy(schema) if isinstance(schema, dict) else {"type": "object"}
    properties = found if isinstance(found := out.get("properties"), dict) else {}
    for name in fixed:
        properties.pop(name, None)
    for name, value in defaults.items():
        if isinstance(properties.get(name), dict):
            properties[name]["default"] = value
    hidden = set(fixed) | set(defaults)
    if isinstance(out.get("required"), list):
        required = [name for name in out["required"] if name not in hidden]
        if required:
            out["required"] = required
        else:
            out.pop("required")
    if "properties" in out or properties:
        out["properties"] = properties
    return out


def _derived(definition: dict[str, Any], fixed: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The Tool field values a remote definition gives a published tool."""
    return {
        "title": definition.get("title") or "",
        "description": definition.get("description") or "",
        "input_schema": published_schema(definition.get("inputSchema"), fixed, defaults),
        "output_schema": definition.get("outputSchema") or None,
        "annotations": definition.get("annotations") or {},
        "meta": _tool_meta(definition.get("_meta")),
    }


def _tool_meta(meta: Any) -> dict[str, Any]:
    """The remote `_meta` a published tool keeps (an MCP Apps UI resource URI stays the remote one: the
    catalog publishes it under the current prefix, core/upstream_uris.py)."""
    if not isinstance(meta, dict):
        return {}
    return {
        key: value
        for key, value in meta.items()
        if isinstance(key, str) and key and _META_KEY.match(key) and not _RESERVED_META.match(key)
    }


def _owner_defaults(tool: Tool, pinned: dict[str, Any]) -> dict[str, Any]:
    """Defaults the owner set on the published schema (those the pinned remote schema lacks)."""
    ours = (tool.input_schema or {}).get("properties") or {}
    theirs = (pinned.get("inputSchema") or {}).get("properties") or {}
    return {
        name: spec["default"]
        for name, spec in ours.items()
        if isinstance(spec, dict) and "default" in spec and "default" not in (theirs.get(name) or {})
    }


def _fixed(tool: Tool) -> dict[str, Any]:
    return dict((tool.handler_config or {}).get("fixed") or {})


def _save_tool(tool: Tool, reason: str, user: Any = None, **changes: Any) -> Tool:
    """full_clean + save, so the change is recorded and announced like any edit."""
    for name, value in changes.items():
        setattr(tool, name, value)
    tool._change_reason = reason[:100]
    tool._history_user = user if user is not None and user.is_authenticated else None
    try:
        tool.full_clean()
        with transaction.atomic():
            tool.save()
    except ValidationError as exc:
        raise UpstreamProblem(f"Tool {tool.name!r}: {history.describe(exc)}") from None
    except IntegrityError:
        raise UpstreamProblem(f"The tenant already has a tool named {tool.name!r}.") from None
    return tool


def publish(
    row: UpstreamTool,
    *,
    name: str | None = None,
    fixed: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    user: Any = None,
    **overrides: Any,
) -> Tool:
    """Publish a remote tool as a Tool of the tenant (prefix + remote name unless `name`), pinning what it offers.

    `fixed` arguments are always sent with these values and hidden from clients; `defaults` are set
    in the published schema; `overrides` are other Tool fields (title, description, approval, ...).
    """
    if row.tool is not None:  # published
        raise UpstreamProblem(f"{row.remote_name!r} is already published as {row.tool.name!r}.")
    if row.gone_at is not None:
        raise UpstreamProblem(f"The upstream no longer offers {row.remote_name!r}.")
    upstream = row.upstream
    fixed = dict(fixed or {})
    definition = row.offered
    tool = Tool(
        tenant_id=row.tenant_id,
        name=name or f"{upstream.prefix}{row.remote_name}",
        handler="upstream",
        handler_config={"tool": row.remote_name, "fixed": fixed},
        upstream=upstream,
        timeout_seconds=upstream.timeout_seconds + TIMEOUT_MARGIN_SECONDS,
        **_derived(definition, fixed, dict(defaults or {})),
    )
    if Tool.objects.filter(tenant_id=row.tenant_id, name=tool.name).exists():
        raise UpstreamProblem(
            f"The tenant already has a tool named {tool.name!r}: publish it under another name."
        )
    if isinstance(definition.get("icons"), list):
        tool.icons = definition["icons"]
    with transaction.atomic():
        _save_tool(tool, f"Published from upstream {upstream.name}", user, **overrides)
        row.tool = tool
        row.pinned = definition
        row.save(update_fields=["tool", "pinned"])
    return tool


def unpublish(row: UpstreamTool, user: Any = None) -> None:
    """Take the remote tool out of the tenant's catalog (its Tool is deleted; history keeps it)."""
    tool = row.tool
    if tool is None:
        return
    with transaction.atomic():
        tool._change_reason = "Unpublished from its upstream"
        tool._history_user = user if user is not None and user.is_authenticated else None
        row.tool = None
        row.pinned = None
        row.withdrawn = False
        row.save(update_fields=["tool", "pinned", "withdrawn"])
        tool.delete()


def diff(row: UpstreamTool) -> list[FieldDiff]:
    """The reviewed fields whose offered value differs from the pinned one (empty: nothing to review)."""
    if row.pinned is None:
        return []
    tool = row.tool
    derived = _derived(row.pinned, _fixed(tool), _owner_defaults(tool, row.pinned)) if tool else {}
    out = []
    for key in REVIEWED_FIELDS:
        old, new = row.pinned.get(key), row.offered.get(key)
        if old == new:
            continue
        overridden = tool is not None and getattr(tool, TOOL_FIELDS[key]) != derived[TOOL_FIELDS[key]]
        out.append(FieldDiff(key, old, new, extras_review.lines(old or "", new or ""), overridden))
    return out


def accept(row: UpstreamTool, user: Any = None) -> Tool:
    """Apply the offered definition to the published tool's fields the owner did not override; pin it."""
    tool = row.tool
    if tool is None:
        raise UpstreamProblem(f"{row.remote_name!r} is not published: publish it instead.")
    if row.gone_at is not None:
        raise UpstreamProblem(f"The upstream no longer offers {row.remote_name!r}.")
    fixed, defaults = _fixed(tool), _owner_defaults(tool, row.pinned or {})
    before = _derived(row.pinned or {}, fixed, defaults)
    after = _derived(row.offered, fixed, defaults)
    changes = {name: after[name] for name in after if getattr(tool, name) == before[name]}
    with transaction.atomic():
        _save_tool(tool, f"Accepted the change of upstream {row.upstream.name}", user, **changes)
        row.pinned = row.offered
        row.save(update_fields=["pinned"])
    return tool
