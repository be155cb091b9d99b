"""The admin's "Check this tenant" page, the warning after a save, and POST /api/v1/tenants/<slug>/check/."""

from __future__ import annotations

import json

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from mcp_app.models import Tool
from tests.admin.support import tool_form_data
from tests.api.conftest import API, ApiClient

pytestmark = pytest.mark.django_db(transaction=True)


def check_url(tenant) -> str:
    return reverse("admin-self-check:check", args=[tenant.pk])


@pytest.fixture
def dotted(tenant_a) -> Tool:
    """A tool clients that pass tools to a model API cannot offer (a dot in its name)."""
    return Tool.objects.create(
        tenant=tenant_a,
        name="greet.v2",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "examples": [{"n": "two"}]},
        handler="template",
        handler_config={"text": "Hello"},
    )


def test_saving_a_definition_shows_the_self_checks_warnings_and_keeps_the_save(client, alice, tool_a):
    client.force_login(alice)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "examples": [{"name": 3}]}
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool_a.pk]),
        tool_form_data(tool_a, input_schema=json.dumps(schema)),
    )
    assert response.status_code == 302  # saved: the check never blocks
    tool_a.refresh_from_db()
    assert tool_a.input_schema == schema
    shown = [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]
    warnings = [text for level, text in shown if level == "warning"]
    assert any("Example 1 of the input schema is refused" in text for text in warnings)
    assert any(check_url(tool_a.tenant) in text for text in warnings)


def test_a_clean_save_shows_no_warning(client, alice, tool_a):
    client.force_login(alice)
    response = client.post(reverse("admin:mcp_app_tool_change", args=[tool_a.pk]), tool_form_data(tool_a))
    assert response.status_code == 302
    assert [m.level_tag for m in get_messages(response.wsgi_request)] == ["success"]


def test_the_page_lists_findings_per_definition_with_a_link_to_fix_each(client, alice, tenant_a, dotted):
    client.force_login(alice)
    page = client.get(check_url(tenant_a))
    assert page.status_code == 200
    text = page.content.decode()
    assert "greet.v2" in text and "Example 1 of the input schema is refused" in text
    assert reverse("admin:mcp_app_tool_change", args=[dotted.pk]) in text
    # Linked from the tenant's page and from the tools' list.
    assert (
        check_url(tenant_a)
        in client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).content.decode()
    )
    assert check_url(tenant_a) in client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()


def test_another_tenants_check_and_a_viewers_answer_404(client, alice, bob, charlie, tenant_a, tenant_b):
    client.force_login(alice)
    assert client.get(check_url(tenant_b)).status_code == 404
    client.force_login(charlie)
    assert client.get(check_url(tenant_a)).status_code == 404
    client.force_login(bob)  # a viewer of tenant A
    assert client.get(check_url(tenant_a)).status_code == 404
    assert check_url(tenant_a) not in client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()


def test_the_api_answers_the_report(alice, tenant_a, dotted):
    response = ApiClient(alice).call("POST", f"{API}/{tenant_a.slug}/check/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is False and body["tenant"] == tenant_a.slug
    (definition,) = body["definitions"]
    assert definition["name"] == "greet.v2" and definition["severity"] == "error"
    assert {f["check"] for f in definition["findings"]} == {"name", "example"}
    assert definition["fix_url"] == reverse("admin:mcp_app_tool_change", args=[dotted.pk])


def test_the_api_answers_another_tenant_as_missing_and_a_viewer_403(alice, bob, tenant_a, tenant_b):
    missing = ApiClient(alice).call("POST", f"{API}/{tenant_b.slug}/check/")
    nowhere = ApiClient(alice).call("POST", f"{API}/no-such-tenant/check/")
    assert missing.status_code == nowhere.status_code == 404
    assert missing.json() == nowhere.json()
    viewer = ApiClient(bob).call("POST", f"{API}/{tenant_a.slug}/check/")
    assert viewer.status_code == 403 and "editor" in json.dumps(viewer.json())


def test_an_http_tool_saved_with_an_address_the_guard_refuses_is_saved_with_a_warning(client, alice, tool_a):
    client.force_login(alice)
    config = {"url": "https://10.0.0.5/hook"}
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool_a.pk]),
        tool_form_data(tool_a, handler="http", handler_config=json.dumps(config)),
    )
    assert response.status_code == 302, response.content[:2000]
    tool_a.refresh_from_db()
    assert tool_a.handler_config == config
    warnings = [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]
    assert any("SSRF policy refuses https://10.0.0.5/hook" in text for text in warnings), warnings
