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
    confirmed = fields.pop("confirm_no_tools", None)
    policy = Policy(tenant=tenant, name=fields.pop("name", "p"), effect=effect, applies_to=applies_to,
                    condition=condition, **fields)  # fmt: skip
    policy.confirm_no_tools = confirmed
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


def test_a_condition_that_cannot_be_evaluated_for_any_caller_or_target_is_refused_naming_the_key(tools) -> None:
    why = refused(tools, "target.nmae == 'drop_table'")
    assert "cannot be evaluated" in why and "no such key: nmae" in why
    # A claim only some identity providers' tokens carry, read without has(): fails closed for all others.
    why = refused(tools, "'finance' in caller.claims.groups", effect="allow")
    assert "no such key: groups" in why and "has(caller.claims.groups)" in why
    save(tools, "target.name == 'drop_table' && !(has(caller.claims.groups) && 'dba' in caller.claims.groups)")


def test_what_depends_on_the_caller_or_the_arguments_is_left_to_the_request(tools) -> None:
    save(tools, "caller.role == 'viewer' && target.annotations.destructiveHint", name="viewers-read")
    save(tools, "caller.client_id == 'a-client-not-seen-yet'", name="one-client")  # no such caller yet: fine
    save(tools, "arguments.table == 'users'", name="not-users")
    save(tools, "target.name == 'nothing-yet'", name="off", enabled=False)  # disabled: not judged


def test_a_tenant_without_targets_of_the_kind_has_nothing_to_judge_against(tenant_a) -> None:
    save(tenant_a, "target.name == 'later'", applies_to="prompts")


def test_a_policy_after_which_no_member_keeps_a_tool_is_refused_unless_confirmed(tools) -> None:
    """Members (alice, bob) as OAuth clients and through API keys lose every tool; anonymous callers
    keep them, so the deny is no "shut everyone out" one: the check with the other policies catches it."""
    members_only = "caller.auth == 'oauth' || caller.auth == 'api_key'"
    why = refused(tools, members_only, confirm_no_tools=False)
    assert "no member of the tenant would have a single tool" in why and "confirm_no_tools: true" in why
    # Two policies that together leave none: each alone keeps a tool, the second is refused.
    save(tools, "target.name == 'drop_table'", name="no-drops", confirm_no_tools=False)
    assert "single tool" in refused(
        tools, "target.name == 'read_rows' && caller.role != ''", name="no-reads", confirm_no_tools=False
    )
    # An allow that members no longer meet, beside them, leaves none too; one that some member meets does not.
    assert "single tool" in refused(
        tools, "caller.role == 'nobody'", effect="allow", name="only", confirm_no_tools=False
    )
    save(tools, "caller.role == 'owner'", effect="allow", name="owners", confirm_no_tools=False)
    # Confirmed, or not asked (an import, the shell): saved.
    save(tools, members_only, name="confirmed", confirm_no_tools=True)
    save(tools, members_only, name="not-asked")
    assert Policy.objects.filter(tenant=tools).count() == 4


def test_a_policy_on_prompts_or_a_tenant_without_members_is_not_asked_to_confirm(tools, tenant_b) -> None:
    save(tools, "caller.auth != 'anonymous'", applies_to="prompts", confirm_no_tools=False)
    Tool.objects.create(tenant=tenant_b, name="t", handler="template", handler_config={"text": "x"})
    save(tenant_b, "caller.auth == 'oauth' || caller.auth == 'api_key'", confirm_no_tools=False)
