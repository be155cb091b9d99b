"""Drafts, publishing and numbered versions of a tenant's tools, prompts, resources and templates, and
of its policies, guardrails and quotas (AMB-362).

A definition's row holds what clients get (its published version, `version`); an editor's changes wait
in the row's `draft` ({field: value}) until an owner or editor publishes them (AMB-218). A definition
made as a draft is a row with `version` 0 that no client sees (the catalog serves `published()` rows
only). Publishing applies the draft through `full_clean` + `save`, so the models' checks, the audit
trail, django-simple-history (each published version is one immutable, numbered history record) and
the one list_changed announcement of a transaction (signals/definitions.py) apply as to any edit.
Secrets are not versioned: a Tool's secret headers take effect when saved (AMB-219).
Who may do it is the caller's business (tenants.access); nothing here reads a request.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from audit.models import Action
from audit.trail import record
from mcp_app.history import service as history
from mcp_app.models import Guardrail, Policy, Prompt, Quota, Resource, ResourceTemplate, Tool, Versioned
from mcp_app.models.policies import NO_TOOL_LEFT_PUBLISHED, leaves_no_member_a_tool
from tenants.models import Tenant

D = TypeVar("D", bound=Versioned)

# The definitions clients use, then the rules that govern their use (AMB-362): a kind's drafts publish
# before the next kind's, so a policy published with the tool it names finds it.
MODELS: tuple[type[Versioned], ...] = (Tool, Prompt, Resource, ResourceTemplate, Policy, Guardrail, Quota)
# Never part of a draft: the row's identity, its bookkeeping, and secrets (written at once, AMB-219).
NOT_DRAFTED = frozenset({"id", "tenant", "updated_at", "version", "draft", "handler_secrets"})
REASON_LENGTH = history.REASON_LENGTH


# The rows that wait to be published: a pending draft, or never published.
WAITING = models.Q(version=0) | models.Q(draft__isnull=False)


class PublishError(Exception):
    """Why a draft could not be staged or published, in words for the person who asked."""


@dataclass(frozen=True)
class Published:
    """One definition a publish made live: what it is and its new version number."""

    kind: str
    label: str
    version: int
    pk: int


def drafted_fields(model: type[Versioned]) -> list[models.Field]:
    return [f for f in model._meta.concrete_fields if f.name not in NOT_DRAFTED]


def _encode(fld: models.Field, value: Any) -> Any:
    if isinstance(fld, models.BinaryField):
        return None if value is None else {"base64": base64.b64encode(bytes(value)).decode()}
    return value


def _decode(fld: models.Field, value: Any) -> Any:
    if isinstance(fld, models.BinaryField):
        return None if value is None else base64.b64decode(value["base64"])
    return value


def _value(obj: models.Model, fld: models.Field) -> Any:
    value = getattr(obj, fld.attname)
    return bytes(value) if isinstance(value, memoryview) else value


def is_drafted(obj: models.Model) -> TypeGuard[Versioned]:
    """Whether the row is a definition, whose changes can wait as a draft."""
    return isinstance(obj, MODELS)


def has_draft(obj: Versioned) -> bool:
    """Whether the definition has changes no client sees yet (or was never published)."""
    return obj.version == 0 or bool(obj.draft)


def status(obj: Versioned) -> str:
    """One short line for lists: "draft", "v3", "v3 + draft"."""
    if obj.version == 0:
        return "draft (never published)"
    return f"v{obj.version} + draft" if obj.draft else f"v{obj.version}"


def apply_draft(obj: D) -> D:
    """Give `obj` (in memory) its draft's values: what Try runs and the form edits."""
    pending = obj.draft or {}
    for fld in drafted_fields(type(obj)):
        if fld.name in pending:
            setattr(obj, fld.attname, _decode(fld, pending[fld.name]))
    return obj


def with_draft(obj: D) -> D:
    """A copy of `obj` with its draft applied; `obj` is left as published."""
    return apply_draft(copy.deepcopy(obj))


def stage(obj: D, user: Any = None) -> D:
    """Keep `obj`'s values (edited in memory, already checked) as its row's draft.

    A new or never-published definition is saved as a draft row (version 0). A published one keeps its
    row as clients see it: what differs from it becomes the draft (nothing differing: no draft). A
    Tool's secrets are written at once (they are never in a draft or a version).
    """
    model = type(obj)
    if obj.pk is None or obj.version == 0:
        obj._keep_version = True
        _attribute(obj, user, "Draft")
        obj.save()
        return obj
    current = model.objects.get(pk=obj.pk)
    if current.tenant_id != obj.tenant_id:
        raise PublishError("A published definition stays in its tenant: export it and import it elsewhere.")
    pending = {
        fld.name: _encode(fld, _value(obj, fld))
        for fld in drafted_fields(model)
        if _value(obj, fld) != _value(current, fld)
    }
    with transaction.atomic():
        model.objects.filter(pk=obj.pk).update(draft=pending or None)
        if (
            isinstance(obj, Tool)
            and isinstance(current, Tool)
            and obj.handler_secrets != current.handler_secrets
        ):
            current.handler_secrets = obj.handler_secrets
            current._keep_version = True
            current.save(update_fields=["handler_secrets", "updated_at"])
    obj.draft = pending or None
    obj.version = current.version
    return obj


def _attribute(obj: Versioned, user: Any, reason: str) -> None:
    # django-simple-history reads these: who made the change, and why.
    obj._change_reason = reason[:REASON_LENGTH]
    obj._history_user = user if user is not None and getattr(user, "is_authenticated", False) else None


def _publish_row(row: Versioned, user: Any, reason: str) -> Published:
    apply_draft(row)
    row.draft = None
    try:
        row.full_clean()
    except ValidationError as exc:
        raise PublishError(f"{row} cannot be published: {history.describe(exc)}") from None
    name = user.get_username() if user is not None and getattr(user, "is_authenticated", False) else ""
    _attribute(row, user, f"{reason} by {name}" if name else reason)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        raise PublishError(
            f"{row} cannot be published: another definition of the tenant has its name or URI."
        ) from None
    return Published(row._meta.model_name or "", str(row), row.version, row.pk)


def publish(obj: Versioned, user: Any = None, *, confirm_no_tools: bool = False) -> Published | None:
    """Make the definition's draft what clients get, as its next version (None: nothing to publish)."""
    done = publish_many([obj], user, confirm_no_tools=confirm_no_tools)
    return done[0] if done else None


def publish_many(
    rows: list[Versioned], user: Any = None, reason: str = "Published", *, confirm_no_tools: bool = False
) -> list[Published]:
    """Publish the drafts of `rows` as one change: all or none, one list_changed per list and tenant.

    Policies published together are asked, as one policy's save is (AMB-356): after them, would no
    member have a single tool? Then nothing is published unless `confirm_no_tools`."""
    done: list[tuple[int, Published]] = []
    with transaction.atomic():
        for obj in rows:
            row = type(obj).objects.select_for_update().filter(pk=obj.pk).first()
            if row is None:
                raise PublishError(f"{obj} no longer exists.")
            if has_draft(row):
                done.append((row.tenant_id, _publish_row(row, user, reason)))
        if not confirm_no_tools:
            for tenant_id in sorted({t for t, d in done if d.kind == "policy"}):
                if leaves_no_member_a_tool(tenant_id):
                    raise PublishError(NO_TOOL_LEFT_PUBLISHED)  # the transaction undoes every publish above
        for tenant_id in sorted({t for t, _d in done}):
            _audit([d for t, d in done if t == tenant_id], tenant_id, user)
    return [d for _t, d in done]


def pending(tenant: Tenant | int) -> list[Versioned]:
    """The tenant's definitions with a draft, kind by kind, in each kind's order."""
    rows: list[Versioned] = []
    for model in MODELS:
        rows.extend(model.objects.for_tenant(tenant).filter(WAITING))
    return rows


def publish_all(tenant: Tenant | int, user: Any = None, *, confirm_no_tools: bool = False) -> list[Published]:
    """Publish every draft of the tenant as one change (the tenant's "publish all drafts")."""
    return publish_many(pending(tenant), user, "Published with all drafts", confirm_no_tools=confirm_no_tools)


def _audit(done: list[Published], tenant_id: int, user: Any) -> None:
    items = [{"kind": d.kind, "name": d.label, "version": d.version} for d in done]
    record(
        Action.DEFINITIONS_PUBLISHED,
        actor=user if user is not None and getattr(user, "is_authenticated", False) else None,
        tenant=Tenant.objects.filter(pk=tenant_id).first(),
        detail={"published": items},
    )


def discard(obj: Versioned) -> bool:
    """Drop the draft: a published definition keeps its published version; one never published
    is deleted (nothing of it was ever live). True when something was discarded."""
    with transaction.atomic():
        row = type(obj).objects.select_for_update().filter(pk=obj.pk).first()
        if row is None or not has_draft(row):
            return False
        if row.version == 0:
            row.delete()
        else:
            type(obj).objects.filter(pk=row.pk).update(draft=None)
    return True


def changes(obj: Versioned) -> list[history.FieldChange]:
    """What the draft changes in the published definition, field by field (the history's diff)."""
    if not obj.draft:
        return []
    return history.compare(obj, with_draft(obj), drafted_fields(type(obj)))


def rollback(obj: Versioned, history_id: int, user: Any = None) -> Versioned:
    """Publish an earlier version again, as the next version (its draft, if any, stays a draft)."""
    row = history.revert(obj, history_id, user)
    back_to = type(obj).history.filter(history_id=history_id).values_list("version", flat=True).first()
    record(
        Action.DEFINITION_ROLLED_BACK,
        actor=user if user is not None and getattr(user, "is_authenticated", False) else None,
        tenant=Tenant.objects.filter(pk=row.tenant_id).first(),
        detail={"kind": row._meta.model_name, "name": str(row), "to": back_to, "version": row.version},
    )
    return row
