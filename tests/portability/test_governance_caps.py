"""An import holds a tenant to its caps on policies, quotas and guardrails (issue 34): a document past a
cap is refused naming it before any of its rows is built (10,000 policies are never compiled one by one),
and one under the cap that would take the tenant past it is refused too. Nothing is saved either way."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mcp_app.governance import conditions
from mcp_app.models import Guardrail, Policy, Quota, Tool
from mcp_app.models.guardrails import MAX_GUARDRAILS_PER_TENANT
from mcp_app.models.policies import MAX_POLICIES_PER_TENANT
from mcp_app.models.quotas import MAX_QUOTAS_PER_TENANT
from mcp_app.portability.document import DocumentError
from mcp_app.portability.importer import import_document
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

GREET = {"name": "greet", "handler": "template", "handler_config": {"text": "Hello, {{ name }}!"}}


def policy(i: int) -> dict[str, Any]:
    return {"name": f"p{i:05d}", "effect": "deny", "condition": f"arguments.name == 'x{i}'"}


def quota(i: int) -> dict[str, Any]:
    return {"name": f"q{i:05d}", "tool": "greet", "calls": 5}


def guardrail(i: int) -> dict[str, Any]:
    return {"name": f"g{i:05d}", "detector": "secrets", "where": "arguments", "action": "block"}


KINDS = [
    ("policies", Policy, policy, MAX_POLICIES_PER_TENANT),
    ("quotas", Quota, quota, MAX_QUOTAS_PER_TENANT),
    ("guardrails", Guardrail, guardrail, MAX_GUARDRAILS_PER_TENANT),
]


def document(**items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "mcp-platform/tenant", "version": 1, "tools": [GREET], **items}


@pytest.fixture
def tenant() -> Tenant:
    made = Tenant.objects.create(slug="capped", name="capped", auth_mode="public")
    Tool.objects.create(tenant=made, **GREET)
    return made


def test_ten_thousand_policies_are_refused_naming_the_cap_before_one_is_compiled(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled: list[str] = []
    real = conditions.compile_condition
    monkeypatch.setattr(conditions, "compile_condition", lambda text: compiled.append(text) or real(text))
    began = time.perf_counter()
    with pytest.raises(DocumentError) as refused:
        import_document(tenant, document(policies=[policy(i) for i in range(10_000)]))
    seconds = time.perf_counter() - began
    assert refused.value.problems == [
        ("policies", f"A tenant has at most {MAX_POLICIES_PER_TENANT} policies. This document has 10000.")
    ]
    assert compiled == [] and Policy.objects.filter(tenant=tenant).count() == 0
    print(f"10,000 policies refused in {seconds * 1000:.0f} ms")


@pytest.mark.parametrize(("key", "model", "item", "cap"), KINDS, ids=[k[0] for k in KINDS])
def test_a_document_past_a_cap_is_refused_and_one_at_it_imports(
    tenant: Tenant, key: str, model: Any, item: Any, cap: int
) -> None:
    with pytest.raises(DocumentError) as refused:
        import_document(tenant, document(**{key: [item(i) for i in range(cap + 1)]}))
    assert refused.value.problems == [
        (key, f"A tenant has at most {cap} {key}. This document has {cap + 1}.")
    ]
    assert model.objects.filter(tenant=tenant).count() == 0
    import_document(tenant, document(**{key: [item(i) for i in range(cap)]}))
    assert model.objects.filter(tenant=tenant).count() == cap


@pytest.mark.parametrize(("key", "model", "item", "cap"), KINDS, ids=[k[0] for k in KINDS])
def test_new_rows_that_would_take_the_tenant_past_a_cap_are_refused(
    tenant: Tenant, key: str, model: Any, item: Any, cap: int
) -> None:
    """Each new row's own check counts only the rows saved before the import: the plan counts them all."""
    half = cap // 2
    import_document(tenant, document(**{key: [item(i) for i in range(half)]}))
    more = [item(i) for i in range(half, cap + 1)]  # under the cap alone, past it with the tenant's rows
    with pytest.raises(DocumentError) as refused:
        import_document(tenant, document(**{key: more}))
    assert refused.value.problems == [
        (key, f"A tenant has at most {cap} {key}. This document would give it {cap + 1}.")
    ]
    assert model.objects.filter(tenant=tenant).count() == half
    # Pruning the rows the document leaves out makes room: the same rows are then within the cap.
    plan = import_document(tenant, document(**{key: more}), prune=True)
    assert plan.counts()["delete"] == half and model.objects.filter(tenant=tenant).count() == len(more)
