"""Import a tenant document: check everything, show what would change, then change it in one transaction.

``plan`` reads the tenant's rows, checks the document against the published JSON Schema and every
row it describes with the models' own ``full_clean`` (``mcp_app/definitions/checks.py``: one implementation
for the admin, the API and this), and returns what would be created, changed (with the field names),
deleted (``prune``) or left unchanged (or kept as it is, ``keep_existing``: a seed that creates what is
missing and keeps what a person edited, AMB-153), or raises DocumentError listing each problem with its path.
``apply`` saves only what differs, so a second import of the same document writes nothing: no save,
no history row, no version bump, no notification (AMB-55). Secrets are never in the document: a
tool keeps its stored secret values, and the plan names the secrets a tool needs but lacks (AMB-56).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models, transaction
from django.utils import timezone

from mcp_app.definitions import checks
from mcp_app.drafts import service as drafts
from mcp_app.models import Provider, Tool, Upstream, UpstreamTool
from mcp_app.models.upstreams import too_many_upstreams
from mcp_app.oauth import external_tokens
from mcp_app.portability import caps
from mcp_app.portability.document import (
    KINDS,
    PROVIDER_SECRET,
    SETTINGS_FIELDS,
    DocumentError,
    Kind,
    default_of,
    in_definition_field,
    path_of,
    same,
    schema_problems,
    secret_names,
    value_of,
)
from tenants import identity_provider
from tenants.models import Tenant

CHANGE_REASON = "imported from a tenant document"
ACTIONS = ("create", "change", "delete", "unchanged")
# How the plan names an upstream's OAuth client secret when it lacks one (set in the admin or the API).
OAUTH_SECRET = "OAuth client secret"


@dataclass
class Change:
    """One row's fate: create, change (with the fields that differ), delete, unchanged or keep."""

    kind: str
    key: str
    action: str
    fields: list[str] = field(default_factory=list)
    obj: models.Model | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "key": self.key, "action": self.action}
        if self.fields:
            out["fields"] = self.fields
        return out


@dataclass
class Plan:
    """What an import does to a tenant; ``apply`` carries it out."""

    tenant: Tenant
    changes: list[Change] = field(default_factory=list)
    settings_changed: list[str] = field(default_factory=list)
    missing_secrets: list[tuple[str, str]] = field(default_factory=list)
    missing_upstream_secrets: list[tuple[str, str]] = field(default_factory=list)
    # Providers (AMB-207) whose document says they have a client secret this tenant does not hold.
    missing_provider_secrets: list[str] = field(default_factory=list)
    # settings.identity introspects, and the tenant holds no secret for its client (AMB-203).
    missing_identity_secret: bool = False
    applied: bool = False

    def of(self, action: str) -> list[Change]:
        return [c for c in self.changes if c.action == action]

    @property
    def has_changes(self) -> bool:
        return bool(self.settings_changed) or any(c.action not in ("unchanged", "keep") for c in self.changes)

    def counts(self) -> dict[str, int]:
        """Rows by action; ``keep`` only in a plan that kept rows (the four others always)."""
        counts = {a: len(self.of(a)) for a in ACTIONS}
        if kept := self.of("keep"):
            counts["keep"] = len(kept)
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant.slug,
            "applied": self.applied,
            "counts": self.counts(),
            "settings_changed": self.settings_changed,
            "changes": [c.as_dict() for c in self.changes],
            "missing_secrets": [{"tool": tool, "secret": name} for tool, name in self.missing_secrets],
            "missing_upstream_secrets": [
                {"upstream": upstream, "secret": name} for upstream, name in self.missing_upstream_secrets
            ],
            "missing_provider_secrets": [
                {"provider": provider, "secret": PROVIDER_SECRET}
                for provider in self.missing_provider_secrets
            ],
            "missing_identity_secret": self.missing_identity_secret,
        }

    def lines(self) -> list[str]:
        """The plan as a reader sees it: one line per row that moves, then the counts."""
        signs = {"create": "+", "change": "~", "delete": "-"}
        out = [f"~ settings: {', '.join(self.settings_changed)}"] if self.settings_changed else []
        for change in self.changes:
            if change.action in signs:
                detail = f" ({', '.join(change.fields)})" if change.fields else ""
                out.append(f"{signs[change.action]} {change.kind} {change.key}{detail}")
        out += [
            f"! tool {tool} needs the secret {name!r}, which it does not have"
            for tool, name in self.missing_secrets
        ]
        out += [
            f"! upstream {upstream} needs the secret {name!r}, which it does not have"
            for upstream, name in self.missing_upstream_secrets
        ]
        out += [
            f"! provider {provider} needs its client secret, which it does not have (set it in the admin or the API)"
            for provider in self.missing_provider_secrets
        ]
        if self.missing_identity_secret:
            out.append(
                "! settings.identity needs its introspection client's secret, which the tenant does not have"
            )
        counts = self.counts()
        out.append(
            f"{counts['create']} created, {counts['change']} changed, {counts['delete']} deleted, "
            f"{counts['unchanged']} unchanged" + (f", {counts['keep']} kept" if "keep" in counts else "")
        )
        return out


def _decode_blob(value: str, where: str, problems: list[tuple[str, str]]) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        problems.append((where, "Not valid base64."))
        return None


def _in_definition_field(key: str, path: str) -> bool:
    """Whether a problem's path (``tools[2].meta``) is a definition field of an item of ``key``."""
    field_name = path.partition("].")[2].split(".")[0].split("[")[0]
    return bool(field_name) and in_definition_field([key, 0, field_name])


def _clean(obj: models.Model, exclude: list[str], base: list[Any], problems: list[tuple[str, str]]) -> None:
    """The model's own checks (fields, validators, clean()), each message at its document path once."""
    try:
        obj.full_clean(exclude=exclude, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            where = path_of(base if name == NON_FIELD_ERRORS else [*base, name])
            problems.extend((where, m) for m in messages if (where, m) not in problems)


def _plan_kind(
    kind: Kind,
    tenant: Tenant,
    items: list[Any],
    prune: bool,
    keep_existing: bool,
    plan: Plan,
    problems: list[tuple[str, str]],
    bad: set[int],
) -> None:
    existing = {
        getattr(row, kind.natural_key): row for row in kind.model._default_manager.filter(tenant=tenant)
    }
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if index in bad:  # already reported by the JSON Schema: its values may not even have the right types
            continue
        key = item[kind.natural_key]
        base = [kind.key, index]
        if key in seen:
            problems.append(
                (path_of([*base, kind.natural_key]), f"Defined twice: also {kind.key}[{seen[key]}].")
            )
            continue
        seen[key] = index
        current = existing.get(key)
        target = (
            kind.model(tenant=tenant) if current is None else kind.model._default_manager.get(pk=current.pk)
        )
        for name in kind.fields:
            value = item.get(name, default_of(kind.model, name)) if name != "blob" else item.get("blob")
            if name == "blob" and value is not None:
                value = _decode_blob(value, path_of([*base, "blob"]), problems)
            setattr(target, name, value)
        _clean(target, ["tenant"], base, problems)
        if kind.model in (Tool, Upstream):
            held = {
                n.lower() for n in (secret_names(current) if isinstance(current, Tool | Upstream) else [])
            }
            lacking = [n for n in item.get("secrets", []) if n.lower() not in held]
            if kind.model is Tool:
                plan.missing_secrets += [(key, n) for n in lacking]
            else:
                if item.get("oauth_client_id") and (
                    not isinstance(current, Upstream) or not current.oauth_client_secret
                ):
                    lacking.append(OAUTH_SECRET)
                plan.missing_upstream_secrets += [(key, n) for n in lacking]
        wants_secret = kind.model is Provider and PROVIDER_SECRET in item.get("secrets", [])
        if wants_secret and (not isinstance(current, Provider) or not current.client_secret):
            plan.missing_provider_secrets.append(key)
        if current is None:
            plan.changes.append(Change(kind.key, key, "create", obj=target))
            continue
        if keep_existing:
            plan.changes.append(Change(kind.key, key, "keep", obj=current))
            continue
        differ = [n for n in kind.fields if not same(value_of(current, n), value_of(target, n))]
        plan.changes.append(Change(kind.key, key, "change" if differ else "unchanged", differ, target))
    if prune:
        for key, row in existing.items():
            if key not in seen:
                plan.changes.append(Change(kind.key, key, "delete", obj=row))


def _plan_settings(
    tenant: Tenant, settings: dict[str, Any], plan: Plan, problems: list[tuple[str, str]], may: bool
) -> None:
    target = Tenant.objects.get(pk=tenant.pk) if tenant.pk else Tenant(slug=tenant.slug)
    for name, value in settings.items():
        setattr(target, name, value)
    _clean(target, ["slug"], ["settings"], problems)
    problems.extend(
        ("settings.identity", problem) for problem in external_tokens.unreachable_urls(target.identity)
    )
    plan.missing_identity_secret = (
        identity_provider.needs_secret(target.identity) and not target.identity_client_secret
    )
    plan.settings_changed = [
        n for n in SETTINGS_FIELDS if n in settings and not same(getattr(tenant, n), settings[n])
    ]
    if plan.settings_changed and not may:
        problems.append(
            ("settings", "Only an owner of the tenant changes its settings; leave them out or ask an owner.")
        )


def plan(
    tenant: Tenant,
    document: Any,
    *,
    prune: bool = False,
    may_change_settings: bool = True,
    keep_existing: bool = False,
) -> Plan:
    """Check the document for this tenant and return what importing it would do (DocumentError if it cannot).

    keep_existing: a definition the tenant has is left as it is, however it differs (action ``keep``);
    only missing ones are created. Settings given are still applied: leave them out to keep them.
    """
    over = caps.over_caps(document)  # refused before anything reads their items
    problems = [*schema_problems(caps.without(document, over)), *caps.refusals(over)]
    if not isinstance(document, dict):
        raise DocumentError(problems or [("(document)", "The document must be an object.")])
    result = Plan(tenant)
    resources = document.get("resources")
    # A tool may link an MCP App the document brings (AMB-272): its resource is saved with the tool.
    alongside = (
        [r.get("uri") for r in resources if isinstance(r, dict)] if isinstance(resources, list) else []
    )
    # A quota may count a tool the document brings (AMB-352).
    tools = document.get("tools")
    tool_names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    with (
        checks.resources_saved_alongside(u for u in alongside if isinstance(u, str)),
        checks.tools_saved_alongside(n for n in tool_names if isinstance(n, str)),
    ):
        for kind in KINDS:
            items = document.get(kind.key, [])
            if not isinstance(items, list) or kind.key in over:
                continue  # reported by the schema, or past its cap
            # An item the schema refused is not built, unless every problem is inside a definition field
            # (JSON, so any value fits the model): then full_clean adds what only it finds (AMB-144).
            bad = {
                int(p.split("]")[0].split("[")[1])
                for p, _m in problems
                if p.startswith(f"{kind.key}[") and not _in_definition_field(kind.key, p)
            }
            _plan_kind(kind, tenant, items, prune, keep_existing, result, problems, bad)
    _check_upstream_count(tenant, result, problems)
    caps.check_counts(tenant, result.changes, problems)
    settings = document.get("settings")
    if isinstance(settings, dict) and not any(
        p == "settings" or p.startswith("settings.") for p, _m in problems
    ):
        _plan_settings(tenant, settings, result, problems, may_change_settings)
    if problems:
        raise DocumentError(problems)
    return result


def _check_upstream_count(tenant: Tenant, plan: Plan, problems: list[tuple[str, str]]) -> None:
    """The tenant's upstreams once the plan is applied stay within MCP_UPSTREAMS_PER_TENANT (each row's
    own check counts only the rows saved before it; a document's new ones are saved together)."""
    changes = [c.action for c in plan.changes if c.kind == "upstreams"]
    after = Upstream.objects.filter(tenant=tenant).count() + changes.count("create") - changes.count("delete")
    cap = django_settings.MCP_UPSTREAMS_PER_TENANT
    if after > cap and not any(m == too_many_upstreams(cap) for _p, m in problems):
        problems.append(("upstreams", f"{too_many_upstreams(cap)} This document would give it {after}."))


def apply(plan: Plan, document: dict[str, Any], user: Any = None, *, draft: bool = False) -> None:
    """Carry out a plan made in the same transaction: only rows that differ are saved or deleted.

    With `draft`, a definition's change is staged as its draft (clients keep the published version
    until it is published, AMB-220); upstreams, providers and settings apply at once as always."""
    if draft and plan.of("delete"):
        raise ValueError("Deleting definitions cannot be staged as drafts: import without pruning.")
    for change in plan.of("delete"):
        _tag(change.obj, user).delete()
    for change in plan.changes:
        if change.action not in ("create", "change"):
            continue
        if draft and change.obj is not None and drafts.is_drafted(change.obj):
            drafts.stage(_tag(change.obj, user), user)
        else:
            _tag(change.obj, user).save()
    _pin(plan, document)
    if plan.settings_changed:
        tenant = plan.tenant
        for name in plan.settings_changed:
            setattr(tenant, name, document["settings"][name])
        tenant.save(update_fields=[*plan.settings_changed, "updated_at"])
    plan.applied = True


def _pin(plan: Plan, document: dict[str, Any]) -> None:
    """Record the pinned definitions the document gives an upstream's published tools (AMB-164).

    As if a sync had seen them: the first real sync compares what the upstream offers with these, so a
    definition that changed since the export waits for review. A tool already linked keeps its row.
    """
    upstreams = {
        c.key: c.obj
        for c in plan.changes
        if c.kind == "upstreams" and c.action != "delete" and isinstance(c.obj, Upstream)
    }
    for item in document.get("upstreams", []):
        upstream = upstreams.get(item["name"])
        for remote_name, definition in (item.get("pinned") or {}).items():
            tool = Tool.objects.filter(
                tenant=plan.tenant,
                handler="upstream",
                upstream=upstream,
                handler_config__tool=remote_name,
                upstream_tool__isnull=True,
            ).first()
            if upstream is None or tool is None:
                continue
            UpstreamTool.objects.update_or_create(
                upstream=upstream,
                remote_name=remote_name,
                defaults={"tenant": plan.tenant, "tool": tool, "pinned": definition},
                create_defaults={
                    "tenant": plan.tenant,
                    "tool": tool,
                    "pinned": definition,
                    "offered": definition,
                    "last_seen_at": timezone.now(),
                },
            )


def _tag(obj: Any, user: Any) -> Any:
    # django-simple-history reads these: who made the change, and why.
    obj._change_reason = CHANGE_REASON
    if user is not None and getattr(user, "is_authenticated", False):
        obj._history_user = user
    return obj


def import_document(
    tenant: Tenant,
    document: Any,
    *,
    prune: bool = False,
    dry_run: bool = False,
    user: Any = None,
    may_change_settings: bool = True,
    keep_existing: bool = False,
    draft: bool = False,
) -> Plan:
    """Plan and (unless dry_run) apply, all in one transaction holding the tenant's row."""
    with transaction.atomic():
        if tenant.pk is not None:
            tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        result = plan(
            tenant,
            document,
            prune=prune,
            may_change_settings=may_change_settings,
            keep_existing=keep_existing,
        )
        if not dry_run:
            apply(result, document, user, draft=draft)
    return result
