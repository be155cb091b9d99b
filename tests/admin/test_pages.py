"""Every admin page of the MCP models renders for editors (editable) and viewers (read-only)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Prompt, ResourceTemplate

pytestmark = pytest.mark.django_db

MODELS = ("tool", "prompt", "resource", "resourcetemplate")


@pytest.fixture
def definitions_a(tool_a, prompt_a, resource_a, template_a) -> dict[str, object]:
    tool_a.handler_secrets = encrypt_secrets({"Authorization": "Bearer hidden-value"})
    tool_a.save()
    return {"tool": tool_a, "prompt": prompt_a, "resource": resource_a, "resourcetemplate": template_a}


@pytest.mark.parametrize("model", MODELS)
def test_an_owner_gets_the_changelist_add_and_change_pages(client, alice, definitions_a, model):
    client.force_login(alice)
    obj = definitions_a[model]
    for url in (
        reverse(f"admin:mcp_app_{model}_changelist"),
        reverse(f"admin:mcp_app_{model}_add"),
        reverse(f"admin:mcp_app_{model}_change", args=[obj.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "hidden-value" not in response.content.decode()


@pytest.mark.parametrize("model", MODELS)
def test_a_viewer_gets_read_only_change_pages_without_secret_values(client, bob, definitions_a, model):
    client.force_login(bob)
    response = client.get(reverse(f"admin:mcp_app_{model}_change", args=[definitions_a[model].pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "hidden-value" not in html
    if model == "tool":
        assert "Authorization (set)" in html


def test_prompt_admin_reports_invalid_messages_as_a_form_error(client, alice, prompt_a):
    client.force_login(alice)
    data = {
        "tenant": prompt_a.tenant_id,
        "name": prompt_a.name,
        "arguments": "[]",
        "messages": '[{"role": "system", "content": {"type": "text", "text": "x"}}]',
        "icons": "[]",
        "meta": "{}",
        "enabled": "on",
        "_publish": "Save and publish",
    }
    response = client.post(reverse("admin:mcp_app_prompt_change", args=[prompt_a.pk]), data)
    assert response.status_code == 200
    assert "messages" in response.context["adminform"].form.errors
    assert Prompt.objects.get(pk=prompt_a.pk).messages[0]["role"] == "user"


def test_resource_template_admin_offers_only_kinds_that_produce_contents(client, alice, template_a):
    client.force_login(alice)
    form = (
        client.get(reverse("admin:mcp_app_resourcetemplate_change", args=[template_a.pk]))
        .context["adminform"]
        .form
    )
    assert [value for value, _ in form.fields["handler"].choices] == ["template", "python"]
    data = {
        "tenant": template_a.tenant_id,
        "uri_template": "a://users/{id}",
        "name": "user",
        "mime_type": "application/json",
        "handler": "python",
        "handler_config": '{"callable": "user_profile"}',
        "completions": '{"id": ["1"]}',
        "annotations": "{}",
        "icons": "[]",
        "meta": "{}",
        "enabled": "on",
        "_publish": "Save and publish",
    }
    url = reverse("admin:mcp_app_resourcetemplate_change", args=[template_a.pk])
    assert client.post(url, data).status_code == 302
    assert ResourceTemplate.objects.get(pk=template_a.pk).handler == "python"
    response = client.post(url, {**data, "completions": '{"nope": ["1"]}'})
    assert "completions" in response.context["adminform"].form.errors
