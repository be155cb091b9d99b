"""Tenant scoping of the admin: viewers read, editors write, other tenants see nothing (style §6)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import McpSession, Prompt, Resource, ResourceTemplate, Tool
from tenants.models import Membership, Role
from tests.admin.support import tool_form_data

pytestmark = pytest.mark.django_db

MODELS = ("tool", "prompt", "resource", "resourcetemplate")


@pytest.fixture
def definitions_a(tool_a, prompt_a, resource_a, template_a) -> dict[str, object]:
    return {"tool": tool_a, "prompt": prompt_a, "resource": resource_a, "resourcetemplate": template_a}


def test_a_member_without_django_model_permissions_sees_the_mcp_models_on_the_admin_index(client, bob):
    assert not bob.user_permissions.exists()
    client.force_login(bob)
    html = client.get(reverse("admin:index")).content.decode()
    for name in ("Tools", "Prompts", "Resources", "Resource templates", "Tenants"):
        assert name in html


def test_bob_the_viewer_sees_the_tool_change_form_read_only(client, bob, tool_a):
    client.force_login(bob)
    response = client.get(reverse("admin:mcp_app_tool_change", args=[tool_a.pk]))
    assert response.status_code == 200
    assert response.context["has_change_permission"] is False
    assert 'name="_save"' not in response.content.decode()


def test_bob_the_viewer_cannot_change_a_tool_post_is_403_and_nothing_changes(
    client, bob, tenant_a, tool_a, django_capture_on_commit_callbacks
):
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post(
            reverse("admin:mcp_app_tool_change", args=[tool_a.pk]),
            tool_form_data(tool_a, description="hacked"),
        )
    assert response.status_code == 403
    tool_a.refresh_from_db()
    assert tool_a.description == "Say hello."
    assert callbacks == []
    tenant_a.refresh_from_db()
    assert tenant_a.definitions_version == 1


@pytest.mark.parametrize("model", MODELS)
def test_bob_the_viewer_can_neither_add_nor_delete(client, bob, definitions_a, model):
    client.force_login(bob)
    obj = definitions_a[model]
    assert client.get(reverse(f"admin:mcp_app_{model}_add")).status_code == 403
    response = client.post(reverse(f"admin:mcp_app_{model}_delete", args=[obj.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_bob_the_viewer_cannot_bulk_delete_from_the_changelist(client, bob, tool_a):
    client.force_login(bob)
    client.post(
        reverse("admin:mcp_app_tool_changelist"),
        {"action": "delete_selected", "_selected_action": [tool_a.pk], "post": "yes"},
    )
    assert Tool.objects.filter(pk=tool_a.pk).exists()


@pytest.mark.parametrize("model", MODELS)
def test_charlie_sees_nothing_of_tenant_a_in_the_changelists(client, charlie, tenant_b, definitions_a, model):
    client.force_login(charlie)
    response = client.get(reverse(f"admin:mcp_app_{model}_changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count == 0
    html = response.content.decode()
    assert "tenant-a" not in html
    assert str(definitions_a[model]) not in html


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("view", ("change", "delete", "history"))
def test_charlie_gets_404_on_tenant_a_object_urls_like_a_missing_object(
    client, charlie, definitions_a, model, view
):
    client.force_login(charlie)
    obj = definitions_a[model]
    assert client.get(reverse(f"admin:mcp_app_{model}_{view}", args=[obj.pk])).status_code == 404
    assert client.get(reverse(f"admin:mcp_app_{model}_{view}", args=[999_999])).status_code == 404


def test_charlie_cannot_post_changes_to_a_tenant_a_tool(client, charlie, tool_a):
    client.force_login(charlie)
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool_a.pk]), tool_form_data(tool_a, description="hacked")
    )
    assert response.status_code == 404
    tool_a.refresh_from_db()
    assert tool_a.description == "Say hello."


def test_charlie_cannot_choose_tenant_a_in_the_tenant_select(client, charlie, tenant_a, tenant_b):
    client.force_login(charlie)
    response = client.get(reverse("admin:mcp_app_tool_add"))
    choices = [
        value for value, _label in response.context["adminform"].form.fields["tenant"].choices if value
    ]
    assert [str(c) for c in choices] == [str(tenant_b.pk)]
    data = tool_form_data(
        Tool(tenant=tenant_a, name="intruder", handler="template", handler_config={"text": "x"})
    )
    response = client.post(reverse("admin:mcp_app_tool_add"), data)
    assert response.status_code == 200
    assert "tenant" in response.context["adminform"].form.errors
    assert not Tool.objects.filter(name="intruder").exists()


def test_the_tenant_filter_lists_only_the_users_tenants(client, charlie, tenant_b, definitions_a):
    Tool.objects.create(tenant=tenant_b, name="b-tool", handler="template", handler_config={"text": "b"})
    client.force_login(charlie)
    html = client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()
    assert "b-tool" in html
    assert "tenant-a" not in html


def test_an_editor_can_change_definitions_but_not_tenant_settings(
    client, django_user_model, tenant_a, tool_a
):
    eve = django_user_model.objects.create_user("eve", "eve@example.com", "pw", is_staff=True)
    Membership.objects.create(user=eve, tenant=tenant_a, role=Role.EDITOR)
    client.force_login(eve)
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool_a.pk]), tool_form_data(tool_a, title="By eve")
    )
    assert response.status_code == 302
    response = client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk]))
    assert response.status_code == 200
    assert response.context["has_change_permission"] is False


def test_a_staff_user_without_memberships_gets_no_mcp_admin(client, django_user_model, tool_a):
    mallory = django_user_model.objects.create_user("mallory", "m@example.com", "pw", is_staff=True)
    client.force_login(mallory)
    html = client.get(reverse("admin:index")).content.decode()
    assert "Tools" not in html
    assert client.get(reverse("admin:mcp_app_tool_changelist")).status_code == 403
    assert client.get(reverse("admin:mcp_app_tool_change", args=[tool_a.pk])).status_code in (403, 404)


def test_a_superuser_sees_every_tenants_definitions(client, admin_user, tool_a, tenant_b):
    Tool.objects.create(tenant=tenant_b, name="b-tool", handler="template", handler_config={"text": "b"})
    client.force_login(admin_user)
    response = client.get(reverse("admin:mcp_app_tool_changelist"))
    assert response.context["cl"].result_count == 2


def test_sessions_are_listed_read_only_for_superusers_only(client, alice, admin_user, tenant_a):
    """MCP sessions are the platform's machinery (AMB-271): an owner no longer sees them."""
    McpSession.objects.create(id="sess-a", tenant=tenant_a, last_seen_at=timezone.now())
    client.force_login(alice)
    assert client.get(reverse("admin:mcp_app_mcpsession_changelist")).status_code == 403
    client.force_login(admin_user)
    assert "sess-a" in client.get(reverse("admin:mcp_app_mcpsession_changelist")).content.decode()
    assert client.get(reverse("admin:mcp_app_mcpsession_add")).status_code == 403


def test_prompt_resource_and_template_rows_of_tenant_a_are_hidden_from_charlie_in_querysets(
    rf, charlie, definitions_a
):
    request = rf.get("/admin/")
    request.user = charlie
    for model in (Prompt, Resource, ResourceTemplate, Tool):
        assert admin.site._registry[model].get_queryset(request).count() == 0
