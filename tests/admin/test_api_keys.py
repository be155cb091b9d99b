"""The API keys' admin (AMB-202): owners mint one and see it once, revoke it; nobody else."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from mcp_app.oauth import api_keys
from tenants.models import ApiKey, Membership, Role, Tenant

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
    return reverse(f"admin:tenants_apikey_{name}", args=args)


def test_an_owner_mints_one_and_sees_the_key_once(client, alice, bob, vault) -> None:
    client.force_login(alice)
    data = {"tenant": vault.pk, "name": "Nightly CI", "acts_as": bob.pk, "scope": "", "days": 30,
            "allowed_addresses": "10.0.0.0/8"}  # fmt: skip
    page = client.post(url("add"), data)
    assert page.status_code == 200, page.content.decode()[:3000]
    key = re.search(r'id="api-key">([^<]+)<', page.content.decode()).group(1)
    row = ApiKey.objects.get()
    assert key.startswith(row.prefix) and row.user == bob and row.created_by == alice
    assert row.scope == "mcp:prompts mcp:resources mcp:tools" and row.allowed_addresses == "10.0.0.0/8"
    detail = client.get(url("change", row.pk)).content.decode()
    assert key not in detail and row.prefix in detail
    service = client.post(url("add"), {**data, "acts_as": "", "allowed_addresses": ""})
    assert "the tenant (service identity)" in service.content.decode()


def test_what_cannot_be_minted_is_refused_with_the_reason(client, alice, vault) -> None:
    client.force_login(alice)
    base = {"tenant": vault.pk, "name": "x", "acts_as": "", "days": 30, "allowed_addresses": ""}
    assert (
        "Not a scope of tenant-a: root:all."
        in client.post(url("add"), {**base, "scope": "root:all"}).content.decode()
    )
    bad = client.post(url("add"), {**base, "scope": "", "allowed_addresses": "here"}).content.decode()
    assert "&#x27;here&#x27; is not an IP address" in bad
    assert not ApiKey.objects.exists()


def test_only_owners_mint_and_revoke_and_another_tenants_key_is_a_404(
    client, alice, editor, charlie, vault, tenant_b
) -> None:
    tenant_b.auth_mode = "oauth"
    tenant_b.save()
    theirs = api_keys.create(tenant_b, charlie, "theirs").row
    mine = api_keys.create(vault, alice, "mine").row
    client.force_login(editor)
    assert client.get(url("add")).status_code == 403
    client.force_login(alice)
    assert client.get(url("change", theirs.pk)).status_code == 404
    revoke = {"action": "revoke_keys", "_selected_action": [theirs.pk, mine.pk]}
    client.post(url("changelist"), revoke)
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None  # not among alice's rows: never selected
    assert ApiKey.objects.get(pk=mine.pk).status == "revoked"
    assert "revoked" in client.get(url("changelist")).content.decode()
