"""History in the admin per role: members read the diffs, editors revert and restore, others get 404."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.history import service
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def history_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_history", args=[tool.pk])


def revert_url(tool: Tool, history_id: int) -> str:
    return reverse("admin:mcp_app_tool_revert", args=[tool.pk, history_id])


def oldest(tool: Tool) -> int:
    return service.versions(Tool, tool.pk)[-1].history_id


def test_alice_sees_who_changed_what_as_a_diff_with_revert_buttons(client, alice, edited_tool):
    client.force_login(alice)
    response = client.get(history_url(edited_tool))
    assert response.status_code == 200
    html = response.content.decode()
    assert "changed by alice" in html
    assert '<span class="del">- Say hello.</span>' in html
    assert '<span class="add">+ Say hello loudly.</span>' in html
    assert "HELLO, {{ name }}!" in html
    assert html.count('value="Roll back to version 1"') == 1  # not on the current version
    assert "Deleted tools" in client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()


def test_the_change_forms_history_link_opens_the_versions(client, alice, edited_tool):
    client.force_login(alice)
    form = client.get(reverse("admin:mcp_app_tool_change", args=[edited_tool.pk])).content.decode()
    assert f'href="{history_url(edited_tool)}"' in form


def test_bob_the_viewer_reads_the_history_but_cannot_revert(client, bob, edited_tool):
    client.force_login(bob)
    html = client.get(history_url(edited_tool)).content.decode()
    assert "Say hello loudly." in html and "Roll back to" not in html
    response = client.post(revert_url(edited_tool, oldest(edited_tool)))
    assert response.status_code == 403
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."


@pytest.mark.parametrize("method", ["get", "post"])
def test_charlie_gets_404_for_tenant_a_history_exactly_like_a_missing_tool(
    client, charlie, edited_tool, method
):
    client.force_login(charlie)
    version = oldest(edited_tool)
    missing = reverse("admin:mcp_app_tool_revert", args=[999999, version])
    if method == "get":
        assert client.get(history_url(edited_tool)).status_code == 404
        assert client.get(reverse("admin:mcp_app_tool_history", args=[999999])).status_code == 404
    else:
        assert client.post(revert_url(edited_tool, version)).status_code == 404
        assert client.post(missing).status_code == 404
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."


def test_a_revert_is_a_get_free_post_only_url(client, alice, edited_tool):
    client.force_login(alice)
    assert client.get(revert_url(edited_tool, oldest(edited_tool))).status_code == 405


def test_alice_reverts_an_edit_it_is_recorded_and_announced_as_list_changed(
    client, alice, tenant_a, edited_tool, listen, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(revert_url(edited_tool, oldest(edited_tool)))
    assert response.status_code == 302 and response.url == history_url(edited_tool)
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello."
    version = Tenant.objects.get(pk=tenant_a.pk).definitions_version
    assert listener.collect() == [{"type": "mcp.list_changed", "kind": "tools", "version": version}]
    html = client.get(history_url(edited_tool)).content.decode()
    assert "Rolled back to version 1 (" in html and "by alice" in html
    # The name as written (the admin passes messages through capfirst: the kind leads the sentence).
    assert f"Tool {edited_tool.name} is rolled back: that version is published again as version 3" in html


def test_a_revert_to_a_version_that_no_longer_validates_shows_why_and_changes_nothing(
    client, alice, edited_tool
):
    Tool.history.filter(history_id=oldest(edited_tool)).update(handler_config={"text": "{% if %}"})
    client.force_login(alice)
    response = client.post(revert_url(edited_tool, oldest(edited_tool)), follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert "This version cannot be used as it is now: handler_config:" in html
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."


def test_a_revert_to_a_name_now_taken_shows_the_clash(client, alice, tenant_a, tool_a):
    client.force_login(alice)
    first = oldest(tool_a)
    tool_a.name = "greet_v2"
    tool_a.save()
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config={"text": "x"})
    html = client.post(revert_url(tool_a, first), follow=True).content.decode()
    assert "already exists" in html
    assert Tool.objects.get(pk=tool_a.pk).name == "greet_v2"


@pytest.mark.parametrize(
    ("model", "make"),
    [
        (
            Prompt,
            lambda t: Prompt.objects.create(
                tenant=t,
                name="review",
                messages=[{"role": "user", "content": {"type": "text", "text": "Hi"}}],
            ),
        ),
        (Resource, lambda t: Resource.objects.create(tenant=t, uri="a://readme", name="readme", text="v1")),
        (
            ResourceTemplate,
            lambda t: ResourceTemplate.objects.create(
                tenant=t, uri_template="a://u/{id}", name="user", handler_config={"text": "u {{ id }}"}
            ),
        ),
    ],
)
def test_every_definition_kind_has_history_and_revert(client, alice, tenant_a, model, make):
    obj = make(tenant_a)
    obj.title = "second"
    obj.save()
    name = model._meta.model_name
    client.force_login(alice)
    html = client.get(reverse(f"admin:mcp_app_{name}_history", args=[obj.pk])).content.decode()
    assert '<span class="add">+ second</span>' in html
    first = service.versions(model, obj.pk)[-1].history_id
    response = client.post(reverse(f"admin:mcp_app_{name}_revert", args=[obj.pk, first]), follow=True)
    assert "is rolled back: that version is published again as version 3" in response.content.decode()
    obj.refresh_from_db()
    assert obj.title == ""


def test_deleted_tools_are_listed_per_tenant_and_alice_restores_one(client, alice, charlie, bob, tool_a):
    pk = tool_a.pk
    tool_a.delete()
    deleted_url = reverse("admin:mcp_app_tool_deleted")
    client.force_login(charlie)
    assert "greet" not in client.get(deleted_url).content.decode()
    record_id = service.deleted(Tool, None)[0].history_id
    restore_url = reverse("admin:mcp_app_tool_restore", args=[record_id])
    assert client.post(restore_url).status_code == 404

    client.force_login(bob)
    html = client.get(deleted_url).content.decode()
    assert "greet" in html and 'value="Restore"' not in html
    assert client.post(restore_url).status_code == 403

    client.force_login(alice)
    assert 'value="Restore"' in client.get(deleted_url).content.decode()
    response = client.post(restore_url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:mcp_app_tool_change", args=[pk])
    assert "enter them again" in response.content.decode()
    assert Tool.objects.get(pk=pk).handler_config == {"text": "Hello, {{ name }}!"}
    assert "greet" not in client.get(deleted_url).content.decode()


def test_restoring_a_tool_whose_name_was_taken_again_shows_the_clash(client, alice, tenant_a, tool_a):
    tool_a.delete()
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config={"text": "x"})
    record_id = service.deleted(Tool, None)[0].history_id
    client.force_login(alice)
    response = client.post(reverse("admin:mcp_app_tool_restore", args=[record_id]), follow=True)
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert Tool.objects.filter(tenant=tenant_a).count() == 1


def test_revert_needs_the_csrf_token(alice, edited_tool):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(revert_url(edited_tool, oldest(edited_tool))).status_code == 403
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."
