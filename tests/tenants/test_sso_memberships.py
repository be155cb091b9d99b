"""Memberships from single sign-on (AMB-213): a tenant's rule gives them, and takes back only its own."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from audit.models import Action, AuditEvent
from mcp_app.portability.document import DocumentError, export_tenant
from mcp_app.portability.importer import import_document
from tenants import invitations, sso_memberships
from tenants.models import GrantedBy, Membership, Role, Tenant
from tests.api.conftest import API, ApiClient
from tests.tenants.test_tenant_admin import tenant_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(db) -> Tenant:
    return Tenant.objects.create(
        slug="acme", name="Acme", sso_email_domains=["acme.test"], sso_role=Role.EDITOR
    )


@pytest.fixture
def ops(db) -> Tenant:
    return Tenant.objects.create(slug="ops", name="Ops", sso_groups=["ops-team"])


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create_user("dana", "dana@acme.test")


def identity(
    email: str = "dana@acme.test", verified: bool = True, groups: tuple[str, ...] = ()
) -> sso_memberships.Identity:
    return sso_memberships.Identity(email=email, email_verified=verified, groups=frozenset(groups))


def test_a_verified_address_of_the_domain_makes_a_member_with_the_rule_s_role(acme, ops, dana):
    outcome = sso_memberships.sync_memberships(dana, identity())
    assert outcome.added == ["acme"] and outcome.removed == []
    membership = Membership.objects.get(user=dana)
    assert (membership.tenant, membership.role, membership.granted_by) == (acme, Role.EDITOR, GrantedBy.SSO)
    dana.refresh_from_db()
    assert dana.is_staff  # an editor works in the admin, as an accepted invitation makes them


def test_the_domain_is_compared_without_case_and_only_whole(acme, dana):
    assert sso_memberships.sync_memberships(dana, identity("Dana@ACME.test")).added == ["acme"]
    Membership.objects.all().delete()
    for address in ("dana@evil-acme.test", "dana@acme.test.evil", "dana@sub.acme.test", "acme.test"):
        assert sso_memberships.sync_memberships(dana, identity(address)).added == [], address


def test_an_unverified_address_matches_no_domain_but_a_group_still_counts(acme, ops, dana):
    assert sso_memberships.sync_memberships(dana, identity(verified=False)).added == []
    outcome = sso_memberships.sync_memberships(dana, identity(verified=False, groups=("ops-team", "other")))
    assert outcome.added == ["ops"]
    assert Membership.objects.get(user=dana).role == Role.VIEWER


def test_a_membership_sso_gave_goes_when_the_rule_no_longer_matches(acme, ops, dana):
    sso_memberships.sync_memberships(dana, identity(groups=("ops-team",)))
    assert set(Membership.objects.filter(user=dana).values_list("tenant__slug", flat=True)) == {"acme", "ops"}
    outcome = sso_memberships.sync_memberships(dana, identity(groups=()))
    assert outcome.removed == ["ops"]
    acme.sso_email_domains = []
    acme.save()
    assert sso_memberships.sync_memberships(dana, identity()).removed == ["acme"]
    assert not Membership.objects.filter(user=dana).exists()


def test_a_membership_given_by_hand_or_by_invitation_is_never_taken_or_changed(acme, ops, dana, alice):
    Membership.objects.create(user=dana, tenant=acme, role=Role.VIEWER)  # by hand (the default)
    invitation = invitations.invite(ops, "dana@acme.test", Role.EDITOR, alice)
    invitations.accept(invitation, dana)
    outcome = sso_memberships.sync_memberships(dana, identity("dana@other.test", groups=()))
    assert outcome.removed == [] and outcome.added == []
    held = dict(Membership.objects.filter(user=dana).values_list("tenant__slug", "granted_by"))
    assert held == {"acme": GrantedBy.HAND, "ops": GrantedBy.INVITATION}
    assert Membership.objects.get(user=dana, tenant=acme).role == Role.VIEWER


def test_an_invitation_accepted_over_an_sso_membership_keeps_it_for_good(acme, dana, alice):
    sso_memberships.sync_memberships(dana, identity())
    invitation = invitations.invite(acme, "dana@acme.test", Role.VIEWER, alice)
    invitations.accept(invitation, dana)
    assert Membership.objects.get(user=dana).granted_by == GrantedBy.INVITATION
    acme.sso_email_domains = []
    acme.save()
    assert sso_memberships.sync_memberships(dana, identity()).removed == []


@pytest.fixture
def alice(django_user_model, acme):
    user = django_user_model.objects.create_user("alice", "alice@acme.test", is_staff=True)
    Membership.objects.create(user=user, tenant=acme, role=Role.OWNER)
    return user


def test_sso_gives_and_takes_in_the_audit_trail_saying_sso(acme, dana, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        sso_memberships.sync_memberships(dana, identity())
    with django_capture_on_commit_callbacks(execute=True):
        acme.sso_email_domains = []
        acme.save()
        sso_memberships.sync_memberships(dana, identity())
    added = AuditEvent.objects.get(action=Action.MEMBER_ADDED, tenant=acme)
    removed = AuditEvent.objects.get(action=Action.MEMBER_REMOVED, tenant=acme)
    assert added.detail == {"member": "dana", "role": "editor", "via": "sso"}
    assert removed.detail == {"member": "dana", "role": "editor", "via": "sso"}


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("sso_role", Role.OWNER, "not a valid choice"),
        ("sso_email_domains", ["Acme.test"], "Not a lower-case domain name"),
        ("sso_email_domains", ["@acme.test"], "Not a lower-case domain name"),
        ("sso_email_domains", "acme.test", "Give a list of domains"),
        ("sso_groups", [""], "Not a group name"),
        ("sso_groups", {"a": 1}, "Give a list of group names"),
    ],
)
def test_a_rule_that_could_give_owner_or_match_nonsense_is_refused_in_words(acme, field, value, words):
    setattr(acme, field, value)
    with pytest.raises(ValidationError) as raised:
        acme.full_clean()
    assert words in str(raised.value.message_dict[field])


def test_the_owner_sets_the_rule_through_the_api_and_owner_is_never_given(acme, alice):
    client = ApiClient(alice)
    path = f"{API}/acme/"
    changed = client.call(
        "PATCH", path, {"sso_email_domains": ["acme.test", "acme.example"], "sso_groups": ["ops"]}
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["sso_email_domains"] == ["acme.test", "acme.example"]
    for body in ({"sso_role": "owner"}, {"sso_email_domains": ["not a domain"]}):
        refused = client.call("PATCH", path, body)
        assert refused.status_code == 400
        assert set(refused.json()["error"]["fields"]) == set(body)
    acme.refresh_from_db()
    assert (acme.sso_role, acme.sso_groups) == (Role.EDITOR, ["ops"])
    members = client.call("GET", f"{API}/acme/members/").json()
    assert [m["granted_by"] for m in members["results"]] == ["hand"]


def test_the_rule_travels_in_the_tenant_document(acme):
    document = export_tenant(acme)
    assert document["settings"]["sso_email_domains"] == ["acme.test"]
    assert document["settings"]["sso_role"] == "editor"
    other = Tenant.objects.create(slug="copy", name="Copy")
    import_document(other, document)
    other.refresh_from_db()
    assert (other.sso_email_domains, other.sso_role) == (["acme.test"], Role.EDITOR)
    document["settings"]["sso_role"] = "owner"
    with pytest.raises(DocumentError) as raised:
        import_document(other, document)
    assert "settings.sso_role" in str(raised.value)


def test_the_owner_sets_the_rule_in_the_tenant_admin_and_owner_is_not_offered(client, acme, alice):
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[acme.pk])
    page = client.get(url).content.decode()
    assert (
        "Single sign-on members" in page
        and '<option value="owner"' not in page.split('name="sso_role"')[1][:400]
    )
    data = tenant_form_data(acme, sso_email_domains='["acme.test", "acme.example"]', sso_role="editor")
    assert client.post(url, data).status_code == 302
    acme.refresh_from_db()
    assert acme.sso_email_domains == ["acme.test", "acme.example"]
    refused = client.post(url, {**data, "sso_email_domains": '["ACME"]'})
    assert refused.status_code == 200 and "Not a lower-case domain name" in refused.content.decode()


def test_a_role_an_owner_changed_makes_the_membership_theirs(acme, dana, alice):
    sso_memberships.sync_memberships(dana, identity())
    client = ApiClient(alice)
    member = next(
        m for m in client.call("GET", f"{API}/acme/members/").json()["results"] if m["username"] == "dana"
    )
    assert member["granted_by"] == "sso"
    assert client.call("PATCH", f"{API}/acme/members/{member['id']}/", {"role": "viewer"}).status_code == 200
    assert Membership.objects.get(user=dana).granted_by == GrantedBy.HAND
    assert sso_memberships.sync_memberships(dana, identity("dana@elsewhere.test")).removed == []
