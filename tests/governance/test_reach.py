"""A policy that can decide nothing, or that would shut everyone out, is refused when saved, saying why
(AMB-356, governance/reach.py); one that reads the caller or the arguments is judged at each request."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.models import Policy, Prompt, Tool
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def tools(tenant_a: Tenant, alice: Any, bob: Any) -> Tenant:
    for name, hints in [("read_rows", {"readOnlyHint": True}), ("drop_table", {"destructiveHint": True})]:
        Tool.objects.create(
            tenant=tenant_a, name=name, handler="template", handler_config={"text": "x"}, annotations=hints
        )
    Prompt.objects.create(
        tenant=tenant_a, name="review", messages=[{"role": "user", "content": {"type": "text", "text": "x"}}]
    )
    return tenant_a


def save(
    tenant: Tenant, condition: str, effect: str = "deny", applies_to: str = "tools", **fields: Any
) -> Policy:
    policy = Policy(tenant=tenant, name=fields.pop("name", "p"), effect=effect, applies_to=applies_to,
                    condition=condition, **fields)  # fmt: skip
    policy.full_clean()
    policy.save()
    return policy


def refused(tenant: Tenant, condition: str, **fields: Any) -> str:
    with pytest.raises(ValidationError) as raised:
        save(tenant, condition, **fields)
    return " ".join(raised.value.message_dict["condition"])


def test_a_condition_on_the_target_that_holds_for_none_of_its_targets_is_refused(tools) -> None:
    assert "holds for none of this tenant's 2 tools" in refused(tools, "target.name == 'drop_tabel'")
    assert "never decide anything" in refused(tools, "target.upstream == 'crm'", effect="allow")
    save(tools, "target.name == 'drop_table'")  # a real tool: saved


def test_a_deny_that_holds_for_every_caller_and_target_is_refused(tools) -> None:
    why = refused(tools, "true")
    assert "shut everyone out" in why and "2 tools" in why
    assert "shut everyone out" in refused(tools, "caller.auth != 'nobody'")
    assert "shut everyone out" in refused(
        tools, "target.kind == 'tool' || target.kind == 'prompt'", applies_to="all"
    )
    save(tools, "true", effect="allow")  # everyone may use everything: the default, written down


def test_what_depends_on_the_caller_or_the_arguments_is_left_to_the_request(tools) -> None:
    save(tools, "caller.role == 'viewer' && target.annotations.destructiveHint", name="viewers-read")
    save(tools, "caller.client_id == 'a-client-not-seen-yet'", name="one-client")  # no such caller yet: fine
    save(tools, "arguments.table == 'users'", name="not-users")
    save(tools, "target.name == 'nothing-yet'", name="off", enabled=False)  # disabled: not judged


def test_a_tenant_without_targets_of_the_kind_has_nothing_to_judge_against(tenant_a) -> None:
    save(tenant_a, "target.name == 'later'", applies_to="prompts")
