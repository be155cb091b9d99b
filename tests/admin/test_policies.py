"""A policy in the admin after which no member keeps a tool (governance/reach.py): the form says so and
saves it only once "Save though no member keeps a tool" is ticked. The simulator takes an identity
provider's claims as a JSON object (AMB-359)."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_app.models import Policy, Tool

pytestmark = pytest.mark.django_db
ADD = "/admin/mcp_app/policy/add/"
SIMULATE = "/admin/mcp_app/policy/simulate/"


def test_the_form_asks_to_confirm_a_policy_that_leaves_no_member_a_tool(alice, bob, tenant_a) -> None:
    Tool.objects.create(tenant=tenant_a, name="echo", handler="template", handler_config={"text": "x"})
    client = Client()
    client.force_login(alice)
    form = {"tenant": tenant_a.pk, "name": "members-out", "description": "", "effect": "deny",
            "applies_to": "tools", "condition": "caller.auth in ['oauth', 'api_key']", "enabled": "on"}  # fmt: skip
    asked = client.post(ADD, form)
    assert asked.status_code == 200
    assert "no member of the tenant would have a single tool" in asked.content.decode()
    assert "Save though no member keeps a tool" in asked.content.decode()
    assert not Policy.objects.exists()
    saved = client.post(ADD, {**form, "confirm_no_tools": "on"})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert Policy.objects.get().name == "members-out"


@pytest.mark.django_db(transaction=True)  # the page runs the simulation on a thread of its own
def test_the_simulator_takes_an_identity_providers_claims_as_json(alice, tenant_a) -> None:
    for name in ("echo", "salaries"):
        Tool.objects.create(tenant=tenant_a, name=name, handler="template", handler_config={"text": name})
    Policy.objects.create(
        tenant=tenant_a, name="salaries-for-finance",
        condition="target.name == 'salaries' && !(has(caller.claims.groups) && 'finance' in caller.claims.groups)",
    )  # fmt: skip
    client = Client()
    client.force_login(alice)
    form = {"tenant": tenant_a.pk, "auth": "identity_provider", "subject": "sam", "kind": "tool",
            "name": "salaries", "arguments": "{}", "scopes": ""}  # fmt: skip
    finance = client.post(SIMULATE, {**form, "claims": '{"groups": ["finance"]}'}).content.decode()
    assert '<h2 id="simulation-decision">Allowed</h2>' in finance
    sales = client.post(SIMULATE, {**form, "claims": '{"groups": ["sales"]}'}).content.decode()
    assert '<h2 id="simulation-decision">Denied</h2>' in sales and "salaries-for-finance" in sales
    broken = client.post(SIMULATE, {**form, "claims": '["finance"]'}).content.decode()
    assert "The claims are a JSON object." in broken and "simulation-decision" not in broken
