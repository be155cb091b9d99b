"""Invitations (AMB-105..107): the mailed link, accepting it signed in or with a new account, and every
way a link can no longer work, each a page and never a 500."""

from __future__ import annotations

import re
import smtplib
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing
from django.test import Client
from django.utils import timezone

from audit.models import Action, AuditEvent
from tenants import invitations
from tenants.models import Invitation, Membership, Role
from tests.audit.conftest import only_event

pytestmark = pytest.mark.django_db

LINK = re.compile(r"https?://\S+/invitations/\S+")


def invited(tenant, inviter, email: str = "dana@example.com", role: str = Role.EDITOR) -> tuple[Invitation, str]:
    """Invite `email` as `inviter` would; the invitation and the link of the mail it sent."""
    invitation = invitations.invite(tenant, email, role, inviter)
    return invitation, link_in(mail.outbox[-1])


def link_in(message: mail.EmailMessage) -> str:
    found = LINK.search(message.body)
    assert found, message.body
    return found.group(0)


def path_of(link: str) -> str:
    return "/invitations/" + link.split("/invitations/", 1)[1]


def test_inviting_mails_one_link_built_from_the_public_url(settings, tenant_a, alice):
    settings.MCP_PUBLIC_URL = "https://mcp.example.org"
    invitation, link = invited(tenant_a, alice)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["dana@example.com"]
    assert link.startswith("https://mcp.example.org/invitations/")
    assert "alice invites you to Tenant A" in message.body and "as editor" in message.body
    assert invitation.status == Invitation.Status.PENDING
    assert (invitation.invited_by, invitation.role) == (alice, Role.EDITOR)


def test_the_link_names_the_invitation_by_signature_only(tenant_a, alice):
    invitation, link = invited(tenant_a, alice)
    token = link.rsplit("/", 1)[1]
    forged = signing.dumps({"id": invitation.pk, "email": "dana@example.com"}, salt="another-salt")
    other_address = signing.dumps({"id": invitation.pk, "email": "eve@example.com"}, salt=invitations.SALT)
    assert invitations.resolve(token).status == Invitation.Status.PENDING
    for bad in (forged, other_address, token[:-2] + "xx", "not-a-token"):
        assert invitations.resolve(bad) == invitations.INVALID


def test_a_new_person_creates_an_account_with_the_invited_address_and_joins_with_its_role(client, tenant_a, alice):
    invitation, link = invited(tenant_a, alice, email="Dana@Example.com")
    page = client.get(path_of(link))
    assert page.status_code == 200
    html = page.content.decode()
    assert "You are invited to Tenant A" in html and "Dana@example.com" in html
    response = client.post(
        path_of(link), {"username": "dana", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase"}
    )
    assert response.status_code == 302 and response["Location"] == path_of(link)
    dana = get_user_model().objects.get(username="dana")
    assert (dana.email, dana.is_staff) == ("Dana@example.com", True)  # an editor works in the admin
    assert Membership.objects.get(user=dana, tenant=tenant_a).role == Role.EDITOR
    welcome = client.get(path_of(link))  # signed in as dana now
    assert welcome.status_code == 200 and "You are a member of Tenant A" in welcome.content.decode()
    assert "Tenant A" in client.get("/").content.decode()


def test_a_get_of_the_link_accepts_nothing(client, tenant_a, alice, django_user_model):
    _invitation, link = invited(tenant_a, alice)
    dana = django_user_model.objects.create_user("dana", "dana@example.com", "dana-pw-123")
    client.force_login(dana)
    assert client.get(path_of(link)).status_code == 200
    assert not Membership.objects.filter(user=dana).exists()


def test_the_account_of_the_address_accepts_once_and_a_viewer_does_not_become_staff(client, tenant_a, alice, django_user_model):
    _invitation, link = invited(tenant_a, alice, role=Role.VIEWER)
    dana = django_user_model.objects.create_user("dana", "DANA@example.com", "dana-pw-123")
    client.force_login(dana)
    assert client.post(path_of(link)).status_code == 302
    assert Membership.objects.get(user=dana, tenant=tenant_a).role == Role.VIEWER
    dana.refresh_from_db()
    assert not dana.is_staff
    other = Client()
    other.force_login(django_user_model.objects.create_user("dana2", "dana@example.com", "dana-pw-123"))
    used = other.post(path_of(link))
    assert used.status_code == 410 and "has been used" in used.content.decode()
    assert Membership.objects.filter(tenant=tenant_a).count() == 2  # alice and dana, nobody else


def test_an_account_with_another_address_is_told_so_and_accepts_nothing(client, tenant_a, alice, charlie):
    _invitation, link = invited(tenant_a, alice)
    client.force_login(charlie)
    html = client.get(path_of(link)).content.decode()
    assert "This invitation is for dana@example.com" in html and "charlie@example.com" in html
    assert "Sign out" in html
    refused = client.post(path_of(link))
    assert refused.status_code == 403
    assert "This invitation is for dana@example.com." in refused.content.decode()
    assert not Membership.objects.filter(user=charlie, tenant=tenant_a).exists()


def test_a_new_account_for_an_address_that_has_one_is_refused_saying_sign_in(client, tenant_a, alice, django_user_model):
    _invitation, link = invited(tenant_a, alice)
    django_user_model.objects.create_user("dana", "dana@example.com", "dana-pw-123")
    response = client.post(
        path_of(link), {"username": "dana-two", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase"}
    )
    assert response.status_code == 200
    assert "exists already: sign in with it instead" in response.content.decode()
    assert not django_user_model.objects.filter(username="dana-two").exists()


def test_a_weak_password_or_a_taken_username_is_a_form_error(client, tenant_a, alice):
    _invitation, link = invited(tenant_a, alice)
    weak = client.post(path_of(link), {"username": "dana", "password1": "short", "password2": "short"})
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    taken = client.post(path_of(link), {"username": "alice", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase"})
    assert "already exists" in taken.content.decode()
    assert not Membership.objects.exclude(user=alice).exists()


def test_an_existing_member_keeps_their_role(client, tenant_a, alice, bob):
    _invitation, link = invited(tenant_a, alice, email="bob@example.com", role=Role.OWNER)
    client.force_login(bob)
    client.post(path_of(link))
    assert Membership.objects.get(user=bob, tenant=tenant_a).role == Role.VIEWER
    assert "Your role there is <strong>viewer</strong>" in client.get(path_of(link)).content.decode()


@pytest.mark.parametrize(
    ("spoil", "status", "words"),
    [
        ("expire", 410, "This invitation has expired"),
        ("revoke", 410, "This invitation was withdrawn"),
        ("tamper", 404, "This invitation link is not valid"),
        ("delete_tenant", 404, "This invitation link is not valid"),
    ],
)
def test_a_link_that_no_longer_works_is_a_page_saying_why(client, tenant_a, alice, spoil, status, words):
    invitation, link = invited(tenant_a, alice)
    path = path_of(link)
    if spoil == "expire":
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    elif spoil == "revoke":
        invitations.revoke(invitation)
    elif spoil == "tamper":
        path = path[:-3] + "abc"
    else:
        tenant_a.delete()
    for method in (client.get, client.post):
        response = method(path)
        assert response.status_code == status
        assert words in response.content.decode()


def test_a_link_past_its_signature_age_is_expired_even_if_the_row_says_otherwise(client, monkeypatch, settings, tenant_a, alice):
    two_days_ago = signing.b62_encode(int(time.time()) - 2 * 86400)
    monkeypatch.setattr(signing.TimestampSigner, "timestamp", lambda self: two_days_ago)
    _invitation, link = invited(tenant_a, alice)
    monkeypatch.undo()
    settings.MCP_INVITATION_DAYS = 1
    response = client.get(path_of(link))
    assert response.status_code == 410 and "has expired" in response.content.decode()


def test_a_second_pending_invitation_of_the_same_address_is_refused(tenant_a, alice):
    invited(tenant_a, alice)
    with pytest.raises(invitations.AlreadyPending):
        invitations.invite(tenant_a, "DANA@example.com", Role.VIEWER, alice)
    assert len(mail.outbox) == 1


def test_invitations_are_limited_per_tenant_and_per_inviter(settings, tenant_a, tenant_b, alice, charlie):
    settings.MCP_INVITATIONS_PER_HOUR = 2
    for n in range(2):
        invitations.invite(tenant_a, f"p{n}@example.com", Role.VIEWER, alice)
    with pytest.raises(invitations.TooManyInvitations) as refused:
        invitations.invite(tenant_a, "p2@example.com", Role.VIEWER, alice)
    assert 3500 < refused.value.retry_after <= 3601
    # Revoking does not give the budget back: invite-and-revoke cannot spam.
    invitations.revoke(Invitation.objects.first())
    with pytest.raises(invitations.TooManyInvitations):
        invitations.invite(tenant_a, "p2@example.com", Role.VIEWER, alice)
    # Another tenant's owner has a budget of their own; one inviter's spans their tenants.
    invitations.invite(tenant_b, "q@example.com", Role.VIEWER, charlie)
    Membership.objects.create(user=alice, tenant=tenant_b, role=Role.OWNER)
    with pytest.raises(invitations.TooManyInvitations):
        invitations.invite(tenant_b, "q2@example.com", Role.VIEWER, alice)
    # An hour later the budget is back.
    Invitation.objects.update(created_at=timezone.now() - timedelta(hours=1, seconds=1))
    invitations.invite(tenant_a, "p2@example.com", Role.VIEWER, alice)


def test_a_mail_that_cannot_be_sent_undoes_the_invitation(monkeypatch, tenant_a, alice):
    def refuse(*args, **kwargs):
        raise smtplib.SMTPServerDisconnected("gone")

    monkeypatch.setattr(invitations, "send_mail", refuse)
    with pytest.raises(invitations.NotSent):
        invitations.invite(tenant_a, "dana@example.com", Role.VIEWER, alice)
    assert not Invitation.objects.exists()


def test_sent_revoked_and_accepted_are_in_the_audit_trail(
    client, tenant_a, alice, django_user_model, django_capture_on_commit_callbacks
):
    def committed():
        return django_capture_on_commit_callbacks(execute=True)

    with committed():
        first, _link = invited(tenant_a, alice)
    with committed():
        invitations.revoke(first)
    with committed():
        _second, link = invited(tenant_a, alice, email="erin@example.com", role=Role.VIEWER)
    erin = django_user_model.objects.create_user("erin", "erin@example.com", "erin-pw-123")
    client.force_login(erin)
    with committed():
        client.post(path_of(link))
    sent = [e.detail["email"] for e in AuditEvent.objects.filter(action=Action.INVITATION_SENT)]
    assert sorted(sent) == ["dana@example.com", "erin@example.com"]
    assert only_event(Action.INVITATION_REVOKED).detail == {"email": "dana@example.com", "role": "editor"}
    accepted = only_event(Action.INVITATION_ACCEPTED)
    assert (accepted.actor, accepted.tenant, accepted.detail) == (erin, tenant_a, {"email": "erin@example.com", "role": "viewer"})
    assert only_event(Action.MEMBER_ADDED).detail == {"member": "erin", "role": "viewer"}


def test_an_invitation_is_accepted_once_even_by_two_requests_that_both_saw_it_pending(tenant_a, alice, django_user_model):
    invitation, _link = invited(tenant_a, alice)
    dana = django_user_model.objects.create_user("dana", "dana@example.com", "dana-pw-123")
    twin = django_user_model.objects.create_user("dana-twin", "dana@example.com", "dana-pw-123")
    invitations.accept(invitation, dana)
    with pytest.raises(invitations.NotPending):
        invitations.accept(invitation, twin)  # the object this request holds still says pending
    assert not Membership.objects.filter(user=twin).exists()
