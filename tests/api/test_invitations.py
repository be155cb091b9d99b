"""Members are invited through the API (AMB-109): the same answer whatever the address, superusers alone
attach an account, owners alone list and revoke invitations, charlie sees nothing of tenant_a's."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from tenants import invitations
from tenants.models import Invitation, Membership, Role
from tests.api.conftest import API, ApiClient

pytestmark = pytest.mark.django_db

MEMBERS = f"{API}/tenant-a/members/"
INVITATIONS = f"{API}/tenant-a/invitations/"
# What differs between two invitations whatever the accounts: the row and its times, and the address.
OWN = {"id", "email", "created_at", "expires_at"}


def without_own(body: dict) -> dict:
    return {key: value for key, value in body.items() if key not in OWN}


def test_an_owners_post_to_members_invites_with_the_same_answer_whether_or_not_the_address_has_an_account(
    as_alice, charlie, tenant_a
):
    existing = as_alice.call("POST", MEMBERS, {"email": "charlie@example.com", "role": "owner"})
    unknown = as_alice.call("POST", MEMBERS, {"email": "nobody@example.com", "role": "owner"})
    assert existing.status_code == unknown.status_code == 202
    assert without_own(existing.json()) == without_own(unknown.json())
    assert existing.json()["status"] == "pending" and existing.json()["invited_by"] == "alice"
    assert not Membership.objects.filter(user=charlie, tenant=tenant_a).exists()
    assert [m.to for m in mail.outbox] == [["charlie@example.com"], ["nobody@example.com"]]


def test_an_owner_cannot_attach_an_account_by_username_and_learns_nothing_of_it(as_alice, charlie, tenant_a):
    existing = as_alice.call("POST", MEMBERS, {"username": "charlie", "role": "owner"})
    unknown = as_alice.call("POST", MEMBERS, {"username": "nobody", "role": "owner"})
    assert existing.status_code == unknown.status_code == 400
    assert existing.json() == unknown.json()
    assert "invite its e-mail address" in existing.json()["error"]["fields"]["username"][0]
    assert not Membership.objects.filter(user=charlie, tenant=tenant_a).exists()


def test_a_superuser_still_attaches_an_account_by_username(alice, charlie, tenant_a):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw-123")
    added = ApiClient(root).call("POST", MEMBERS, {"username": "charlie", "role": "viewer"})
    assert added.status_code == 201 and added.json()["username"] == "charlie"
    assert Membership.objects.get(user=charlie, tenant=tenant_a).role == Role.VIEWER
    unknown = ApiClient(root).call("POST", MEMBERS, {"username": "nobody", "role": "viewer"})
    assert unknown.status_code == 400 and "username" in unknown.json()["error"]["fields"]


def test_a_body_with_both_or_neither_is_a_400(as_alice, tenant_a):
    for body in ({"role": "viewer"}, {"email": "a@example.com", "username": "alice"}, {"email": "not an address"}):
        response = as_alice.call("POST", MEMBERS, body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "invalid"


def test_owners_list_read_and_revoke_invitations(as_alice, alice, tenant_a):
    created = as_alice.call("POST", INVITATIONS, {"email": "dana@example.com", "role": "editor"})
    assert created.status_code == 201
    pk = created.json()["id"]
    listed = as_alice.call("GET", f"{INVITATIONS}?status=pending").json()
    assert [(i["email"], i["role"], i["status"]) for i in listed["results"]] == [("dana@example.com", "editor", "pending")]
    assert as_alice.call("GET", f"{INVITATIONS}{pk}/").json()["email"] == "dana@example.com"
    revoked = as_alice.call("POST", f"{INVITATIONS}{pk}/revoke/")
    assert (revoked.status_code, revoked.json()["status"]) == (200, "revoked")
    again = as_alice.call("POST", f"{INVITATIONS}{pk}/revoke/")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")
    assert as_alice.call("GET", f"{INVITATIONS}?status=pending").json()["count"] == 0
    assert as_alice.call("GET", f"{INVITATIONS}?status=revoked").json()["count"] == 1
    assert as_alice.call("GET", f"{INVITATIONS}?status=whatever").status_code == 400


def test_a_pending_invitation_of_the_same_address_is_a_400_naming_it(as_alice, tenant_a):
    as_alice.call("POST", MEMBERS, {"email": "dana@example.com"})
    again = as_alice.call("POST", MEMBERS, {"email": "Dana@EXAMPLE.com"})
    assert again.status_code == 400 and "pending already" in again.json()["error"]["fields"]["email"][0]


def test_viewers_neither_see_nor_send_invitations(as_alice, as_bob, tenant_a):
    as_alice.call("POST", INVITATIONS, {"email": "dana@example.com"})
    for method, url in (("GET", INVITATIONS), ("POST", INVITATIONS), ("POST", MEMBERS)):
        response = as_bob.call(method, url, {"email": "eve@example.com"} if method == "POST" else None)
        assert response.status_code == 403, (method, url)
        assert response.json()["error"]["message"].startswith("Your role in this tenant is viewer")
    assert Invitation.objects.count() == 1


def test_charlie_gets_404_for_tenant_a_invitations_exactly_like_missing_ones(alice, as_charlie, tenant_a, tenant_b):
    invitation = invitations.invite(tenant_a, "dana@example.com", Role.VIEWER, alice)
    missing = as_charlie.call("GET", f"{INVITATIONS}999999/")
    for method, url in (("GET", f"{INVITATIONS}{invitation.pk}/"), ("POST", f"{INVITATIONS}{invitation.pk}/revoke/")):
        hidden = as_charlie.call(method, url)
        assert (hidden.status_code, hidden.json()) == (404, missing.json())
    assert as_charlie.call("GET", INVITATIONS).status_code == 404
    assert as_charlie.call("POST", INVITATIONS, {"email": "x@example.com"}).status_code == 404
    own = as_charlie.call("GET", f"{API}/tenant-b/invitations/{invitation.pk}/")
    assert (own.status_code, own.json()) == (404, missing.json())
    assert as_charlie.call("GET", f"{API}/tenant-b/invitations/").json()["results"] == []
    assert Invitation.objects.get(pk=invitation.pk).status == Invitation.Status.PENDING


def test_sending_past_the_hourly_limit_is_a_429_with_retry_after(settings, as_alice, tenant_a):
    settings.MCP_INVITATIONS_PER_HOUR = 2
    for n in range(2):
        assert as_alice.call("POST", MEMBERS, {"email": f"p{n}@example.com"}).status_code == 202
    refused = as_alice.call("POST", MEMBERS, {"email": "p2@example.com"})
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert 3500 < int(refused["Retry-After"]) <= 3601
    assert as_alice.call("POST", INVITATIONS, {"email": "p2@example.com"}).status_code == 429
    assert len(mail.outbox) == 2
