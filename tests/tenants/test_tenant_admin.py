"""Tenant and membership admin: members see their tenants, owners manage them, superusers create them."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core import mail
from django.urls import reverse

from mcp_app.catalog import loader
from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Tool
from tenants import invitations
from tenants.models import Invitation, Membership, Role, Tenant

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
        "stream_poll_seconds": 0,
        "stream_poll_retry_ms": 1000,
        "identity": "{}",
        "sso_email_domains": "[]",
        "sso_groups": "[]",
        "sso_role": "viewer",
        "tool_discovery": tenant.tool_discovery,
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


def test_the_owner_turns_polling_on_in_the_admin_and_the_served_tenant_carries_it(client, alice, tenant_a):
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert "Long answers" in client.get(url).content.decode()
    too_long = client.post(url, tenant_form_data(tenant_a, stream_poll_seconds=3601))
    assert too_long.status_code == 200 and "less than or equal to 3600" in too_long.content.decode()
    polling = {"stream_poll_seconds": 25, "stream_poll_retry_ms": 1500}
    assert client.post(url, tenant_form_data(tenant_a, **polling)).status_code == 302
    tenant_a.refresh_from_db()
    info = loader.tenant_info(tenant_a)
    assert (info.stream_poll_seconds, info.stream_poll_retry_ms) == (25, 1500)


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


def test_the_owner_invites_by_address_where_the_membership_add_form_was(
    client, alice, tenant_a, django_user_model
):
    dave = django_user_model.objects.create_user("dave", "d@example.com", "pw", is_staff=True)
    client.force_login(alice)
    data = {"tenant": tenant_a.pk, "user": "dave", "role": Role.EDITOR, "_save": "Save"}
    for response in (
        client.get(reverse("admin:tenants_membership_add")),
        client.post(reverse("admin:tenants_membership_add"), data),
    ):
        assert (response.status_code, response["Location"]) == (302, reverse("admin:tenants_invitation_add"))
    assert not Membership.objects.filter(user=dave).exists()
    answers = []
    for email in ("d@example.com", "nobody@example.com"):  # an account's address, and none
        invite = {"tenant": tenant_a.pk, "email": email, "role": Role.EDITOR}
        response = client.post(reverse("admin:tenants_invitation_add"), invite, follow=True)
        answers.append([str(m).replace(email, "<address>") for m in response.context["messages"]])
    assert answers[0] == answers[1] == ["Invitation sent to <address>; it is valid for 7 days."]
    assert len(mail.outbox) == 2 and not Membership.objects.filter(user=dave).exists()
    listed = client.get(reverse("admin:tenants_invitation_changelist") + "?status=pending").content.decode()
    assert "d@example.com" in listed and "nobody@example.com" in listed


def test_a_superuser_still_attaches_an_account_by_username(client, admin_user, tenant_a, django_user_model):
    dave = django_user_model.objects.create_user("dave", "d@example.com", "pw", is_staff=True)
    client.force_login(admin_user)
    data = {"tenant": tenant_a.pk, "user": "dave", "role": Role.EDITOR, "_save": "Save"}
    assert client.post(reverse("admin:tenants_membership_add"), data).status_code == 302
    assert Membership.objects.get(user=dave, tenant=tenant_a).role == Role.EDITOR
    response = client.post(reverse("admin:tenants_membership_add"), {**data, "user": "nobody"})
    assert "No user with that username." in str(response.context["adminform"].form.errors)


def test_an_owner_cannot_move_a_membership_to_another_person_or_tenant(
    client, alice, bob, charlie, tenant_a, tenant_b
):
    Membership.objects.create(user=alice, tenant=tenant_b, role=Role.OWNER)
    membership = Membership.objects.get(user=bob, tenant=tenant_a)
    client.force_login(alice)
    data = {"tenant": tenant_b.pk, "user": "charlie", "role": Role.EDITOR, "_save": "Save"}
    assert (
        client.post(reverse("admin:tenants_membership_change", args=[membership.pk]), data).status_code == 302
    )
    membership.refresh_from_db()
    assert (membership.user, membership.tenant, membership.role) == (bob, tenant_a, Role.EDITOR)


def test_only_owners_see_invitations_and_revoke_them(client, alice, bob, tenant_a):
    invitation = invitations.invite(tenant_a, "dana@example.com", Role.VIEWER, alice)
    client.force_login(bob)
    assert client.get(reverse("admin:tenants_invitation_changelist")).status_code == 403
    assert client.get(reverse("admin:tenants_invitation_change", args=[invitation.pk])).status_code == 404
    assert client.get(reverse("admin:tenants_invitation_add")).status_code == 403
    client.force_login(alice)
    page = client.get(reverse("admin:tenants_invitation_change", args=[invitation.pk]))
    assert page.status_code == 200 and "dana@example.com" in page.content.decode()
    changelist = reverse("admin:tenants_invitation_changelist")
    client.post(changelist, {"action": "revoke", "_selected_action": [invitation.pk]})
    invitation.refresh_from_db()
    assert invitation.status == Invitation.Status.REVOKED
    assert (
        client.post(
            reverse("admin:tenants_invitation_delete", args=[invitation.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert Invitation.objects.filter(pk=invitation.pk).exists()


def test_charlie_sees_nothing_of_tenant_a_invitations_and_cannot_invite_there(
    client, alice, charlie, tenant_a, tenant_b
):
    invitation = invitations.invite(tenant_a, "dana@example.com", Role.VIEWER, alice)
    client.force_login(charlie)
    assert (
        "dana@example.com" not in client.get(reverse("admin:tenants_invitation_changelist")).content.decode()
    )
    hidden = client.get(reverse("admin:tenants_invitation_change", args=[invitation.pk]))
    missing = client.get(reverse("admin:tenants_invitation_change", args=[999999]))
    assert hidden.status_code == missing.status_code == 404
    client.post(
        reverse("admin:tenants_invitation_changelist"),
        {"action": "revoke", "_selected_action": [invitation.pk]},
    )
    invitation.refresh_from_db()
    assert invitation.status == Invitation.Status.PENDING
    response = client.post(
        reverse("admin:tenants_invitation_add"),
        {"tenant": tenant_a.pk, "email": "x@example.com", "role": Role.OWNER},
    )
    assert response.status_code == 200 and "tenant" in response.context["adminform"].form.errors
    assert not Invitation.objects.filter(email="x@example.com").exists()


def test_the_admin_says_when_the_invitation_limit_is_reached(client, settings, alice, tenant_a):
    settings.MCP_INVITATIONS_PER_HOUR = 1
    client.force_login(alice)
    for email in ("a@example.com", "b@example.com"):
        response = client.post(
            reverse("admin:tenants_invitation_add"),
            {"tenant": tenant_a.pk, "email": email, "role": Role.VIEWER},
        )
    assert "Too many invitations: at most 1 an hour" in str(response.context["adminform"].form.errors)
    assert list(Invitation.objects.values_list("email", flat=True)) == ["a@example.com"]


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
    assert response.status_code == 302  # to the invitation form: owners attach nobody directly
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


INTROSPECTED = {
    "issuer": "https://idp.example.com",
    "introspection_url": "https://idp.example.com/introspect",
    "client_id": "mcp-rs",
    "audience": "api://mcp",
}


def test_the_owner_sets_the_identity_provider_and_its_secret_write_only(client, alice, tenant_a):
    """AMB-203: the form's own section; the secret stored encrypted, never shown, required to introspect."""
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    page = client.get(url).content.decode()
    assert "Your own identity provider" in page and 'name="new_identity_client_secret"' in page
    identity = json.dumps(INTROSPECTED)
    refused = client.post(url, tenant_form_data(tenant_a, auth_mode="oauth", identity=identity))
    assert refused.status_code == 200
    assert "The introspection client&#x27;s secret is required." in refused.content.decode()
    with_secret = tenant_form_data(
        tenant_a, auth_mode="oauth", identity=identity, new_identity_client_secret="s3cret-rs"
    )
    saved = client.post(url, with_secret)
    assert saved.status_code == 302, saved.content.decode()[:3000]
    tenant_a.refresh_from_db()
    assert tenant_a.identity == INTROSPECTED
    assert decrypt_secrets(tenant_a.identity_client_secret) == {"client_secret": "s3cret-rs"}
    again = client.get(url).content.decode()
    assert "s3cret-rs" not in again and tenant_a.identity_client_secret not in again
    no_audience = json.dumps({**INTROSPECTED, "audience": ""})
    bad = client.post(url, tenant_form_data(tenant_a, auth_mode="oauth", identity=no_audience))
    assert bad.status_code == 200 and "audience is required" in bad.content.decode()
    private = json.dumps({**INTROSPECTED, "introspection_url": "https://192.168.1.10/introspect"})
    refused_url = client.post(url, tenant_form_data(tenant_a, auth_mode="oauth", identity=private))
    assert (
        refused_url.status_code == 200
        and "introspection_url: The URL points to" in refused_url.content.decode()
    )
