"""A tenant document held to a tenant's caps on policies, quotas and guardrails (issue 34).

Each row's own check (`definitions/rules.governance_rule`) counts the rows saved before it, and an import
saves its rows together: so the plan counts them. A list longer than its cap is refused before any of
its items is read (the JSON Schema's check of 10,000 policies alone took 0.6-0.9 s, and cleaning each
would compile its condition); a shorter one that would take the tenant past the cap with the rows it
has is refused once the plan knows what it creates and deletes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models

from mcp_app.models import Guardrail, Policy, Quota
from mcp_app.models.guardrails import MAX_GUARDRAILS_PER_TENANT
from mcp_app.models.policies import MAX_POLICIES_PER_TENANT
from mcp_app.models.quotas import MAX_QUOTAS_PER_TENANT
from mcp_app.portability.document import KINDS
from tenants.models import Tenant

CAPS: dict[type[models.Model], int] = {
    Policy: MAX_POLICIES_PER_TENANT,
    Quota: MAX_QUOTAS_PER_TENANT,
    Guardrail: MAX_GUARDRAILS_PER_TENANT,
}
CAPPED = {kind.key: (kind.model, CAPS[kind.model]) for kind in KINDS if kind.model in CAPS}


def too_many(cap: int, plural: str) -> str:
    """The words of every refusal past a cap (the models' own check says the same)."""
    return f"A tenant has at most {cap} {plural}."


def over_caps(document: Any) -> dict[str, int]:
    """The governance lists of the document longer than their caps, and their lengths."""
    if not isinstance(document, dict):
        return {}
    return {
        key: len(items)
        for key, (_model, cap) in CAPPED.items()
        if isinstance(items := document.get(key), list) and len(items) > cap
    }


def without(document: Any, over: dict[str, int]) -> Any:
    """The document without the lists `over_caps` found (what the JSON Schema then checks)."""
    return {k: v for k, v in document.items() if k not in over} if over else document


def refusals(over: dict[str, int]) -> list[tuple[str, str]]:
    """A problem at each list `over_caps` found."""
    return [(key, f"{too_many(CAPPED[key][1], key)} This document has {n}.") for key, n in over.items()]


def check_counts(tenant: Tenant, changes: Iterable[Any], problems: list[tuple[str, str]]) -> None:
    """The tenant's rows of each capped kind once the plan's `changes` are applied stay within the cap."""
    changes = list(changes)
    for key, (model, cap) in CAPPED.items():
        # Said once: the document's own count, or each new row's check (the tenant is at its cap already).
        if any(m.startswith(too_many(cap, key)) for _p, m in problems):
            continue
        actions = [c.action for c in changes if c.kind == key]
        if "create" not in actions:
            continue
        after = (
            model._default_manager.filter(tenant=tenant).count()
            + actions.count("create")
            - actions.count("delete")
        )
        if after > cap:
            problems.append((key, f"{too_many(cap, key)} This document would give it {after}."))
