"""The history of tenant definitions: versions with a readable per-field diff, revert and restore.

django-simple-history records a row per save or delete of a Tool, Prompt, Resource or
ResourceTemplate, and of a Policy, Guardrail or Quota (AMB-362) (who, when, the whole row; a Tool's
secrets never, AMB-60). This module reads those
rows for the admin and the API (one implementation): each version with what changed since the one
before, JSON fields diffed line by line on their pretty-printed form. A revert or a restore is an
ordinary edit: the row goes through full_clean (mcp_app/definitions/checks.py and the unique constraints)
and save, so it is itself recorded (with its reason) and announced like any change (signals/definitions.py).
Who may do it is the caller's business (tenants.access); nothing here reads a request.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Subquery

from mcp_app.models import Guardrail, Policy, Prompt, Quota, Resource, ResourceTemplate, Tool, Versioned
from tenants.models import Tenant

# The URL word of each definition kind (API paths), and back.
KINDS: dict[str, type[Versioned]] = {
    "tools": Tool,
    "prompts": Prompt,
    "resources": Resource,
    "resource-templates": ResourceTemplate,
    "policies": Policy,
    "guardrails": Guardrail,
    "quotas": Quota,
}
# A revert never moves a definition to another tenant (AMB-61); `id` is the row itself.
NOT_REVERTED = frozenset({"id", "tenant", "version"})
# Bookkeeping every version has: its number is shown beside it, never as a change.
NOT_DIFFED = frozenset({"id", "version"})
TYPE_LABELS = {"+": "created", "~": "changed", "-": "deleted"}
REASON_LENGTH = 100  # history_change_reason is a CharField(100)


class HistoryError(Exception):
    """Why a revert or restore did not happen, in words for the person who asked."""


class NoSuchVersion(HistoryError):
    """The version is not in this object's history (or is another tenant's): answer 404."""


@dataclass(frozen=True)
class FieldChange:
    name: str
    label: str
    old: str
    new: str
    # (kind, text): kind is "-" removed, "+" added, " " context, "@" a hunk header.
    lines: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Version:
    history_id: int
    object_id: int
    date: datetime
    user: str
    type: str  # created / changed / deleted
    reason: str
    label: str  # the definition's name at that version
    number: int  # the published version it is (AMB-218); 0: recorded before versions were numbered
    tenant_id: int | None
    changes: list[FieldChange]
    record: Any = field(repr=False, compare=False)


def is_definition(model: type[models.Model]) -> bool:
    return model in KINDS.values()


def _fields(record: Any) -> list[models.Field]:
    return [f for f in record.tracked_fields if f.name not in NOT_DIFFED]


def _text(value: Any, fld: models.Field, tenants: dict[int, str]) -> str:
    """A field's value as the text that is diffed: JSON pretty-printed, binary summarised."""
    if isinstance(fld, models.JSONField):
        return "" if value is None else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    if isinstance(fld, models.BinaryField):
        if value is None:
            return ""
        data = bytes(value)
        return f"{len(data)} bytes (sha256 {hashlib.sha256(data).hexdigest()[:16]})"
    if isinstance(fld, models.ForeignKey):
        return tenants.get(value, str(value)) if value is not None else ""
    if isinstance(fld, models.BooleanField):
        return "yes" if value else "no"
    return "" if value is None else str(value)


def _line_diff(old: str, new: str) -> list[tuple[str, str]]:
    if "\n" not in old and "\n" not in new:
        return [(kind, text) for kind, text in (("-", old), ("+", new)) if text]
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
    lines = []
    for line in diff:
        if line.startswith(("---", "+++")):
            continue
        lines.append(("@", line) if line.startswith("@@") else (line[:1] or " ", line[1:]))
    return lines


def diff(older: Any | None, newer: Any, tenants: dict[int, str] | None = None) -> list[FieldChange]:
    """What changed from `older` to `newer` (two history records; None: everything `newer` has)."""
    return compare(older, newer, _fields(newer), tenants)


def compare(
    older: Any | None, newer: Any, fields: list[models.Field], tenants: dict[int, str] | None = None
) -> list[FieldChange]:
    """What changed in `fields` from `older` to `newer` (history records or rows alike)."""
    tenants = tenants or {}
    changes = []
    for fld in fields:
        new = _text(getattr(newer, fld.attname), fld, tenants)
        old = _text(getattr(older, fld.attname), fld, tenants) if older is not None else ""
        if old != new:
            label = str(fld.verbose_name)
            changes.append(FieldChange(fld.name, label, old, new, _line_diff(old, new)))
    return changes


def _label(record: Any) -> str:
    for name in ("name", "uri", "uri_template"):
        value = getattr(record, name, "")
        if value:
            return str(value)
    return f"#{record.id}"


def _tenant_slugs(records: list[Any]) -> dict[int, str]:
    ids = {r.tenant_id for r in records if r.tenant_id is not None}
    return dict(Tenant.objects.filter(id__in=ids).values_list("id", "slug"))


def _versions(records: list[Any]) -> list[Version]:
    """`records` newest first, each compared with the next older one of the same object."""
    tenants = _tenant_slugs(records)
    versions = []
    for i, record in enumerate(records):
        older = records[i + 1] if i + 1 < len(records) else None
        changes = [] if record.history_type == "-" else diff(older, record, tenants)
        user = record.history_user
        versions.append(
            Version(
                history_id=record.history_id,
                object_id=record.id,
                date=record.history_date,
                user=user.get_username() if user is not None else "",
                type=TYPE_LABELS.get(record.history_type, record.history_type),
                reason=record.history_change_reason or "",
                label=_label(record),
                number=getattr(record, "version", 0) or 0,
                tenant_id=record.tenant_id,
                changes=changes,
                record=record,
            )
        )
    return versions


def versions(model: type[Versioned], object_id: int) -> list[Version]:
    """Every recorded version of one definition (live or deleted), newest first."""
    records = list(model.history.filter(id=object_id).select_related("history_user"))
    return _versions(records)


def when(date: datetime) -> str:
    return date.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def describe(exc: ValidationError) -> str:
    """A refusal of full_clean in one line, each field named."""
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    parts = []
    for name, errors in exc.message_dict.items():
        text = " ".join(errors)
        parts.append(text if name == NON_FIELD_ERRORS else f"{name}: {text}")
    return "; ".join(parts)


def _save_checked(obj: Versioned, reason: str, user: Any, *, insert: bool) -> None:
    """full_clean then save in one transaction; a refusal becomes a HistoryError naming the fields."""
    obj._change_reason = reason[:REASON_LENGTH]
    obj._history_user = user if user is not None and user.is_authenticated else None
    try:
        obj.full_clean()
        with transaction.atomic():
            obj.save(force_insert=insert)
    except ValidationError as exc:
        raise HistoryError(f"This version cannot be used as it is now: {describe(exc)}") from None
    except IntegrityError:
        # A concurrent save took the name between the check and the write.
        raise HistoryError(
            "This version clashes with another definition of the tenant (same name or URI)."
        ) from None


def revert(obj: Versioned, history_id: int, user: Any) -> Versioned:
    """Give `obj` the fields of one of its versions (its tenant and a Tool's secrets stay as they are)."""
    record = type(obj).history.filter(id=obj.pk, history_id=history_id).first()
    if record is None:
        raise NoSuchVersion("No such version of this definition.")
    if record.history_type == "-":
        raise HistoryError("That entry records the deletion: pick a version before it.")
    current = type(obj).objects.get(pk=obj.pk)
    for fld in _fields(record):
        if fld.name not in NOT_REVERTED:
            setattr(current, fld.attname, getattr(record, fld.attname))
    name = user.get_username() if user is not None else "someone"
    number = getattr(record, "version", 0)
    which = (
        f"version {number} ({when(record.history_date)})"
        if number
        else f"version of {when(record.history_date)}"
    )
    _save_checked(current, f"Rolled back to {which} by {name}", user, insert=False)
    return current


def between(model: type[Versioned], object_id: int, older_id: int, newer_id: int) -> list[FieldChange]:
    """What changed from one recorded version of a definition to another (any two, either order)."""
    records = {
        r.history_id: r for r in model.history.filter(id=object_id, history_id__in=(older_id, newer_id))
    }
    if older_id not in records or newer_id not in records:
        raise NoSuchVersion("No such version of this definition.")
    older, newer = records[older_id], records[newer_id]
    return diff(older, newer, _tenant_slugs([older, newer]))


def deleted(model: type[Versioned], tenant_ids: set[int] | None) -> list[Version]:
    """The deletions of definitions that are still gone, newest first (within `tenant_ids`; None: all)."""
    live = model.objects.values("pk")
    qs = model.history.filter(history_type="-").exclude(id__in=Subquery(live))
    if tenant_ids is not None:
        qs = qs.filter(tenant_id__in=tenant_ids)
    seen: set[int] = set()
    latest = []
    for record in qs.select_related("history_user").order_by("-history_date", "-history_id"):
        if record.id not in seen:
            seen.add(record.id)
            latest.append(record)
    return _versions(latest)


def deletion(model: type[Versioned], history_id: int, tenant_ids: set[int] | None) -> Any:
    """The record of one deletion within `tenant_ids` (None: any), or NoSuchVersion."""
    qs = model.history.filter(history_id=history_id, history_type="-")
    if tenant_ids is not None:
        qs = qs.filter(tenant_id__in=tenant_ids)
    record = qs.first()
    if record is None:
        raise NoSuchVersion("No such deleted definition.")
    return record


def restore(record: Any, user: Any) -> Versioned:
    """Bring a deleted definition back as it was when deleted, with its id (its history continues).

    A Tool comes back without secret values (they are never in history): enter them again."""
    model = record.instance_type
    if model.objects.filter(pk=record.id).exists():
        raise HistoryError("This definition exists again already: revert it from its own history.")
    instance = record.instance
    name = user.get_username() if user is not None else "someone"
    _save_checked(instance, f"Restored by {name} (deleted {when(record.history_date)})", user, insert=True)
    return instance
