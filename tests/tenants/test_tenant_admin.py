"""Tenant and membership admin: members see their tenants, owners manage them, superusers create them."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.urls import reverse

from mcp_app.catalog import loader
from mcp_app.models import Tool
from tenants.models import Membership, Role, Tenant

pytestmark = pytest.mark.django_db


def tenant_form_data(tenant: Tenant, **overrides) -> dict:
    data = {
        "slug": tenant.slug,
        "name": tenant.name,
        "title": tenant.title,
        "description": tenant.description,
        "server_version": tenant.server_version,
        "is_active": "on",
        "auth_mode": tenant.auth_mode,
        "instructions": tenant.instructions,
        "website_url": "",
        "icons": "[]",
        "allowed_origins": "",
        "cache_ttl_ms": "60000",
        "cache_scope": "auto",
        "task_ttl_seconds": 3600,
        "calls_per_minute": 0,
        "calls_per_minute_per_tool": 0,
        "calls_per_minute_per_caller": 0,
        "max_sessions": 0,
        "max_background_runs": 0,
        "max_streams": 0,
        "max_streams_per_session": 0,
        "max_body_bytes": 0,
        "_save": "Save",
    }
    data.update(overrides)
    return data


def test_members_see_only_their_tenants_in_the_tenant_changelist(client, bob, charlie, tenant_a, tenant_b):
    client.force_login(charlie)
    html = client.get(reverse("admin:tenants_tenant_changelist")).content.decode()
    assert "tenant-b" in html
    assert "tenant-a" not in html
    assert client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).status_code == 404


def test_the_owner_edits_tenant_settings_without_resetting_the_definitions_version(
    client, alice, tenant_a, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    form_page = client.get(url)  # the form is loaded at version 1
    assert f"{settings.MCP_PUBLIC_URL}/t/tenant-a/mcp" in form_page.content.decode()
    Tenant.objects.filter(pk=tenant_a.pk).update(definitions_version=7)  # a tool edit meanwhile
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, tenant_form_data(tenant_a, instructions="Updated."))
    assert response.status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.instructions == "Updated."
    assert tenant_a.definitions_version == 8  # never written back to 1, then bumped once


def test_the_owner_sets_the_tenants_quotas_in_the_admin_and_the_served_tenant_carries_them(
    client, alice, tenant_a
):
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert "Quotas" in client.get(url).content.decode()
    quotas = {"calls_per_minute": 600, "calls_per_minute_per_tool": 100, "calls_per_minute_per_caller": 30}
    assert client.post(url, tenant_form_data(tenant_a, **quotas)).status_code == 302
    tenant_a.refresh_from_db()
    info = loader.tenant_info(tenant_a)
    assert (info.calls_per_minute, info.calls_per_minute_per_tool, info.calls_per_minute_per_caller) == (
        600,
        100,
        30,
    )


def test_the_owner_cannot_rename_the_tenant_slug(client, alice, tenant_a):
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    client.post(url, tenant_form_data(tenant_a, slug="renamed"))
    tenant_a.refresh_from_db()
    assert tenant_a.slug == "tenant-a"


def test_a_viewer_cannot_change_tenant_settings(client, bob, tenant_a):
    client.force_login(bob)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, tenant_form_data(tenant_a, name="Hacked")).status_code == 403
    tenant_a.refresh_from_db()
    assert tenant_a.name == "Tenant A"


def test_only_superusers_create_or_delete_tenants(client, alice, admin_user, tenant_a):
    client.force_login(alice)
    assert client.get(reverse("admin:tenants_tenant_add")).status_code == 403
    assert (
        client.post(reverse("admin:tenants_tenant_delete", args=[tenant_a.pk]), {"post": "yes"}).status_code
        == 403
    )
    client.force_login(admin_user)
    new = Tenant(slug="new-tenant", name="New")
    assert client.post(reverse("admin:tenants_tenant_add"), tenant_form_data(new)).status_code == 302
    assert Tenant.objects.filter(slug="new-tenant").exists()


def test_deleting_a_tenant_with_definitions_does_not_fail_on_the_notifications(
    client, admin_user, tenant_a, django_capture_on_commit_callbacks
):
    Tool.objects.create(tenant=tenant_a, name="t", handler="template", handler_config={"text": "x"})
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:tenants_tenant_delete", args=[tenant_a.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Tenant.objects.filter(pk=tenant_a.pk).exists()


def test_the_owner_adds_a_member_by_username(client, alice, tenant_a, django_user_model):
    dave = django_user_model.objects.create_user("dave", "d@example.com", "pw", is_staff=True)
    client.force_login(alice)
    data = {"tenant": tenant_a.pk, "user": "dave", "role": Role.EDITOR, "_save": "Save"}
    assert client.post(reverse("admin:tenants_membership_add"), data).status_code == 302
    assert Membership.objects.get(user=dave, tenant=tenant_a).role == Role.EDITOR
    response = client.post(reverse("admin:tenants_membership_add"), {**data, "user": "nobody"})
    assert "No user with that username." in str(response.context["adminform"].form.errors)


def test_viewers_see_memberships_but_cannot_manage_them(client, alice, bob, tenant_a):
    client.force_login(bob)
    assert "alice" in client.get(reverse("admin:tenants_membership_changelist")).content.decode()
    assert client.get(reverse("admin:tenants_membership_add")).status_code == 403
    membership = Membership.objects.get(user=alice)
    assert (
        client.post(
            reverse("admin:tenants_membership_delete", args=[membership.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_charlie_cannot_see_or_add_memberships_of_tenant_a(client, alice, charlie, tenant_a, tenant_b):
    client.force_login(charlie)
    html = client.get(reverse("admin:tenants_membership_changelist")).content.decode()
    assert "alice" not in html
    data = {"tenant": tenant_a.pk, "user": "charlie", "role": Role.OWNER, "_save": "Save"}
    response = client.post(reverse("admin:tenants_membership_add"), data)
    assert response.status_code == 200
    assert "tenant" in response.context["adminform"].form.errors
    assert not Membership.objects.filter(user=charlie, tenant=tenant_a).exists()


def test_the_last_owner_can_be_neither_demoted_nor_removed(client, alice, tenant_a):
    client.force_login(alice)
    membership = Membership.objects.get(user=alice, tenant=tenant_a)
    url = reverse("admin:tenants_membership_change", args=[membership.pk])
    response = client.post(
        url, {"tenant": tenant_a.pk, "user": "alice", "role": Role.VIEWER, "_save": "Save"}
    )
    assert "at least one owner" in str(response.context["adminform"].form.errors)
    response = client.post(reverse("admin:tenants_membership_delete", args=[membership.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert Membership.objects.get(pk=membership.pk).role == Role.OWNER
