"""A policy in the admin after which no member keeps a tool (governance/reach.py): the form says so and
saves it only once "Save though no member keeps a tool" is ticked."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_app.models import Policy, Tool

pytestmark = pytest.mark.django_db
ADD = "/admin/mcp_app/policy/add/"


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
