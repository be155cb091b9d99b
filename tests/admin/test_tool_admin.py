"""Editing tools in /admin: notifications, validation errors and write-only secret headers."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from mcp_app.handlers.secrets import decrypt_secrets, encrypt_secrets
from mcp_app.models import Tool
from tenants.models import Tenant
from tests.admin.support import tool_form_data

pytestmark = pytest.mark.django_db


def change_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_change", args=[tool.pk])


def test_tl12_alice_edits_a_tool_in_the_admin_bumps_the_version_and_publishes_tools_list_changed(
    client, alice, tenant_a, tool_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(tenant_a.id)
    before = tenant_a.definitions_version
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(change_url(tool_a), tool_form_data(tool_a, description="Say hello nicely."))
    assert response.status_code == 302, response.content[:2000]
    tool_a.refresh_from_db()
    assert tool_a.description == "Say hello nicely."
    version = Tenant.objects.get(pk=tenant_a.pk).definitions_version
    # AMB-18: a description-only edit is a change of the list too.
    assert version == before + 1
    assert listener.collect() == [{"type": "mcp.list_changed", "kind": "tools", "version": version}]


def test_admin_adds_a_tool_with_a_registered_python_callable_chosen_from_the_select(
    client, alice, tenant_a, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    data = tool_form_data(
        Tool(
            tenant=tenant_a, name="echo", handler="python", handler_config={}, input_schema={"type": "object"}
        ),
        python_callable="echo",
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:mcp_app_tool_add"), data)
    assert response.status_code == 302, response.content[:3000]
    assert Tool.objects.get(tenant=tenant_a, name="echo").handler_config == {"callable": "echo"}


def test_the_tool_form_offers_handler_kinds_and_registered_python_callables(client, alice, tool_a):
    client.force_login(alice)
    html = client.get(change_url(tool_a)).content.decode()
    for kind in ("template", "http", "python"):
        assert f'value="{kind}"' in html
    assert '<option value="count_slowly">' in html


def test_json_fields_are_shown_pretty_printed(client, alice, tool_a):
    client.force_login(alice)
    html = client.get(change_url(tool_a)).content.decode()
    assert "{\n  &quot;type&quot;: &quot;object&quot;" in html


def test_an_output_schema_that_is_not_an_object_is_saved_and_said_to_reach_2026_clients_only(
    client, alice, tool_a
):
    client.force_login(alice)
    assert "every revision" in client.get(change_url(tool_a)).content.decode()
    response = client.post(change_url(tool_a), tool_form_data(tool_a, output_schema='{"type": "string"}'))
    assert response.status_code == 302
    tool_a.refresh_from_db()
    assert tool_a.output_schema == {"type": "string"}
    html = client.get(change_url(tool_a)).content.decode()
    assert "2026-07-28 clients only" in html and "legacy clients do not see this tool" in html


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        (
            {"input_schema": '{"type": "object", "properties": {"x": {"type": 12}}}'},
            "input_schema",
            "not a valid JSON Schema",
        ),
        ({"input_schema": '{"type": "array"}'}, "input_schema", '"type": "object" at the root'),
        ({"output_schema": '{"type": "nonsense"}'}, "output_schema", "not a valid JSON Schema"),
        ({"input_schema": '{"type": "object",'}, "input_schema", "Invalid JSON"),
        ({"name": "bad name!"}, "name", "Tool names are 1-64 characters"),
        ({"name": "x" * 65}, "name", "at most 64 characters"),
        ({"meta": '{"mcp.dev/flag": true}'}, "meta", "reserved for MCP"),
        ({"meta": '{"api.modelcontextprotocol.org/x": 1}'}, "meta", "reserved for MCP"),
        ({"annotations": '{"readOnlyHint": "yes"}'}, "annotations", "must be true or false"),
        ({"annotations": '{"fastHint": true}'}, "annotations", "Unknown annotation"),
        ({"icons": '[{"src": "http://example.com/a.png"}]'}, "icons", "https: URL or a data: URI"),
        ({"handler_config": '{"text": "{% include \\"x\\" %}"}'}, "handler_config", "not allowed"),
        ({"handler": "shell"}, "handler", "Select a valid choice"),
    ],
)
def test_bp12_invalid_tool_definitions_are_form_errors_and_nothing_is_saved(
    client, alice, tool_a, overrides, field, message
):
    client.force_login(alice)
    response = client.post(change_url(tool_a), tool_form_data(tool_a, **overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert any(message in error for error in errors[field]), errors[field]
    tool_a.refresh_from_db()
    assert tool_a.name == "greet"
    assert tool_a.meta == {}


def test_python_handler_without_a_registered_callable_is_refused(client, alice, tool_a):
    client.force_login(alice)
    response = client.post(change_url(tool_a), tool_form_data(tool_a, handler="python", handler_config="{}"))
    assert response.status_code == 200
    assert "registered python handler" in str(response.context["adminform"].form.errors)


def test_secret_headers_are_stored_encrypted_and_never_shown_again(client, alice, tool_a):
    client.force_login(alice)
    secret = "Bearer s3cr3t-token-value"
    data = tool_form_data(tool_a, secret_headers=json.dumps({"Authorization": secret}))
    response = client.post(change_url(tool_a), data)
    assert response.status_code == 302
    tool_a.refresh_from_db()
    assert secret not in tool_a.handler_secrets
    assert decrypt_secrets(tool_a.handler_secrets) == {"Authorization": secret}
    html = client.get(change_url(tool_a)).content.decode()
    assert secret not in html
    assert tool_a.handler_secrets not in html
    assert "Authorization (set)" in html


def test_secret_headers_are_not_echoed_back_when_the_form_has_errors(client, alice, tool_a):
    client.force_login(alice)
    secret = "Bearer do-not-echo"
    data = tool_form_data(tool_a, name="bad name!", secret_headers=json.dumps({"Authorization": secret}))
    response = client.post(change_url(tool_a), data)
    assert response.status_code == 200
    assert secret not in response.content.decode()


def test_blank_secret_headers_keep_the_stored_ones_and_clear_removes_them(client, alice, tool_a):
    tool_a.handler_secrets = encrypt_secrets({"X-Api-Key": "k"})
    tool_a.save()
    client.force_login(alice)
    assert client.post(change_url(tool_a), tool_form_data(tool_a, title="Kept")).status_code == 302
    tool_a.refresh_from_db()
    assert decrypt_secrets(tool_a.handler_secrets) == {"X-Api-Key": "k"}
    assert client.post(change_url(tool_a), tool_form_data(tool_a, clear_secrets="on")).status_code == 302
    tool_a.refresh_from_db()
    assert tool_a.handler_secrets == ""


def test_secret_headers_must_be_an_object_of_strings(client, alice, tool_a):
    client.force_login(alice)
    response = client.post(change_url(tool_a), tool_form_data(tool_a, secret_headers='{"Authorization": 1}'))
    assert response.status_code == 200
    assert "secret_headers" in response.context["adminform"].form.errors
