"""The service clients' admin (AMB-197): owners make one and see its secret once, revoke it; nobody else."""

from __future__ import annotations

import base64
import re

import pytest
from django.urls import reverse
from oauth2_provider.models import AccessToken, Application

from mcp_app.oauth import service_clients
from tenants.models import Membership, Role, ServiceClient, Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def vault(tenant_a) -> Tenant:
    tenant_a.auth_mode = "oauth"
    tenant_a.save()
    return tenant_a


@pytest.fixture
def editor(django_user_model, vault):
    user = django_user_model.objects.create_user("ed", "ed@example.com", "ed-pw-12345", is_staff=True)
    Membership.objects.create(user=user, tenant=vault, role=Role.EDITOR)
    return user


def url(name: str, *args: object) -> str:
    return reverse(f"admin:tenants_serviceclient_{name}", args=args)


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def test_an_owner_makes_one_sees_the_secret_once_and_it_gets_tokens(client, alice, bob, vault) -> None:
    client.force_login(alice)
    data = {"tenant": vault.pk, "name": "Nightly CI", "acts_as": bob.pk, "scope": ""}
    page = client.post(url("add"), data)
    assert page.status_code == 200, page.content.decode()[:3000]
    html = page.content.decode()
    client_id = re.search(r'id="client-id">([^<]+)<', html).group(1)
    secret = re.search(r'id="client-secret">([^<]+)<', html).group(1)
    row = ServiceClient.objects.get(application__client_id=client_id)
    assert row.application.user == bob and row.created_by == alice
    assert row.scope == "mcp:prompts mcp:resources mcp:tools"
    assert secret not in client.get(url("change", row.pk)).content.decode()
    token = client.post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(client_id, secret)
    )
    assert token.status_code == 200 and AccessToken.objects.get(application=row.application).user == bob


def test_a_non_member_or_an_unknown_scope_is_refused_with_the_reason(client, alice, charlie, vault) -> None:
    client.force_login(alice)
    refused = client.post(url("add"), {"tenant": vault.pk, "name": "x", "acts_as": charlie.pk, "scope": ""})
    # charlie is no member of any tenant alice owns: not even offered.
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    wrong = client.post(url("add"), {"tenant": vault.pk, "name": "x", "acts_as": alice.pk, "scope": "root:all"})
    assert "Not a scope of tenant-a: root:all." in wrong.content.decode()
    assert not ServiceClient.objects.exists()


def test_only_owners_make_them_and_another_tenants_client_is_a_404(
    client, alice, editor, charlie, vault, tenant_b
) -> None:
    tenant_b.auth_mode = "oauth"
    tenant_b.save()
    theirs = service_clients.create(tenant_b, charlie, "theirs").row
    client.force_login(editor)
    assert client.get(url("add")).status_code == 403
    client.force_login(alice)
    assert client.get(url("change", theirs.pk)).status_code == 404
    assert client.post(url("delete", theirs.pk), {"post": "yes"}).status_code == 404
    assert ServiceClient.objects.filter(pk=theirs.pk).exists()


def test_deleting_one_revokes_the_client_and_its_tokens(client, alice, vault) -> None:
    made = service_clients.create(vault, alice, "CI")
    client.post(
        "/oauth/token",
        {"grant_type": "client_credentials"},
        HTTP_AUTHORIZATION=basic(made.client_id, made.client_secret),
    )
    assert AccessToken.objects.filter(application__client_id=made.client_id).count() == 1
    client.force_login(alice)
    assert client.post(url("delete", made.row.pk), {"post": "yes"}).status_code == 302
    assert not Application.objects.filter(client_id=made.client_id).exists()
    assert not AccessToken.objects.filter(application__client_id=made.client_id).exists()
