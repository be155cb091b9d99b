"""API keys through the API (AMB-202): owners mint one (the key in that answer only), list, revoke;
viewers and other tenants' owners cannot; bad requests say why; each minting and revoking is audited."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from audit.models import Action, AuditEvent
from mcp_app.core.types import TenantInfo
from mcp_app.oauth import resource_server, tokens
from tenants.models import ApiKey
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
KEYS = f"{API}/tenant-a/api-keys/"


@pytest.fixture(autouse=True)
def _oauth(tenant_a) -> None:
    tenant_a.auth_mode = "oauth"
    tenant_a.save()
    tokens.reset()


def authenticate(key: str, tenant, address: str = "127.0.0.1"):
    info = TenantInfo(id=tenant.pk, slug=tenant.slug, name=tenant.name, auth_mode="oauth")
    return async_to_sync(resource_server.authenticate)(f"Bearer {key}", "", info, address)


def test_an_owner_mints_lists_and_revokes_one_and_each_is_audited(as_alice, tenant_a, bob) -> None:
    made = as_alice.call(
        "POST",
        KEYS,
        {
            "name": "Nightly CI",
            "acts_as": "bob",
            "scope": "mcp:tools",
            "days": 3,
            "allowed_addresses": ["127.0.0.1"],
        },
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["key"].startswith(body["prefix"]) and body["endpoint"].endswith("/t/tenant-a/mcp")
    assert body["acts_as"] == "bob" and body["scope"] == "mcp:tools" and body["status"] == "active"
    assert body["allowed_addresses"] == ["127.0.0.1/32"] and body["created_by"] == "alice"
    assert authenticate(body["key"], tenant_a).user_id == bob.pk
    listed = as_alice.call("GET", KEYS).json()["results"]
    assert [row["prefix"] for row in listed] == [body["prefix"]] and all("key" not in row for row in listed)
    assert as_alice.call("DELETE", f"{KEYS}{body['id']}/").status_code == 204
    assert as_alice.call("GET", f"{KEYS}{body['id']}/").json()["status"] == "revoked"
    with pytest.raises(resource_server.Refusal):
        authenticate(body["key"], tenant_a)
    actions = set(
        AuditEvent.objects.filter(client_id=f"api-key:{body['id']}").values_list("action", flat=True)
    )
    assert actions == {Action.API_KEY_CREATED, Action.API_KEY_REVOKED}


def test_a_key_of_the_tenant_itself(as_alice, tenant_a) -> None:
    body = as_alice.call("POST", KEYS, {"name": "agent"}).json()
    assert body["acts_as"] is None and body["scope"] == "mcp:prompts mcp:resources mcp:tools"
    assert authenticate(body["key"], tenant_a).user_id is None


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        ({"acts_as": "charlie"}, "acts_as", "No member 'charlie' of tenant-a."),  # as one nowhere (AMB-281)
        ({"acts_as": "nobody"}, "acts_as", "No member 'nobody'"),
        ({"scope": "root:all"}, "scope", "Not a scope of tenant-a: root:all."),
        ({"days": 0}, "days", "greater than or equal to 1"),
        ({"days": 9999}, "days", "less than or equal to 730"),
        (
            {"allowed_addresses": ["10.0.0.0/8", "nowhere"]},
            "allowed_addresses",
            "'nowhere' is not an IP address",
        ),
        ({"allowed_addresses": "10.0.0.1"}, "allowed_addresses", "Expected a list"),
    ],
)
def test_what_cannot_be_minted_is_a_400_saying_why(as_alice, charlie, payload, field, says) -> None:
    refused = as_alice.call("POST", KEYS, {"name": "x", **payload})
    assert refused.status_code == 400, refused.json()
    assert says in str(refused.json()) and field in str(refused.json())
    assert not ApiKey.objects.exists()


def test_viewers_and_other_tenants_owners_cannot(as_bob, as_charlie, as_alice) -> None:
    assert as_bob.call("POST", KEYS, {"name": "x"}).status_code == 403
    assert as_bob.call("GET", KEYS).status_code == 403
    made = as_alice.call("POST", KEYS, {"name": "CI"}).json()
    assert as_charlie.call("GET", f"{KEYS}{made['id']}/").status_code == 404
    assert as_charlie.call("DELETE", f"{KEYS}{made['id']}/").status_code == 404
    assert ApiKey.objects.get(pk=made["id"]).revoked_at is None
