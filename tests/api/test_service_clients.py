"""Service clients through the API (AMB-197): owners make one (the secret in that answer only), list,
revoke; viewers and other tenants' owners cannot; each making and revoking is audited."""

from __future__ import annotations

import base64

import pytest
from oauth2_provider.models import AccessToken, Application

from audit.models import Action, AuditEvent
from tenants.models import ServiceClient
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
CLIENTS = f"{API}/tenant-a/service-clients/"


@pytest.fixture(autouse=True)
def _oauth(tenant_a) -> None:
    tenant_a.auth_mode = "oauth"
    tenant_a.save()


def test_an_owner_makes_lists_and_revokes_one_and_each_is_audited(client, as_alice, alice, bob) -> None:
    made = as_alice.call("POST", CLIENTS, {"name": "Nightly CI", "acts_as": "bob", "scope": "mcp:tools"})
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["acts_as"] == "bob" and body["scope"] == "mcp:tools" and body["created_by"] == "alice"
    assert body["token_endpoint"].endswith("/oauth/token") and body["audience"].endswith("/t/tenant-a/mcp")
    pair = base64.b64encode(f"{body['client_id']}:{body['client_secret']}".encode()).decode()
    token = client.post("/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=f"Basic {pair}")
    assert token.status_code == 200 and token.json()["scope"] == "mcp:tools"
    listed = as_alice.call("GET", CLIENTS).json()["results"]
    assert [row["client_id"] for row in listed] == [body["client_id"]]
    assert all("client_secret" not in row for row in listed)
    assert as_alice.call("DELETE", f"{CLIENTS}{body['id']}/").status_code == 204
    assert not Application.objects.filter(client_id=body["client_id"]).exists()
    assert not AccessToken.objects.filter(application__client_id=body["client_id"]).exists()
    actions = set(AuditEvent.objects.filter(client_id=body["client_id"]).values_list("action", flat=True))
    assert {Action.SERVICE_CLIENT_CREATED, Action.SERVICE_CLIENT_REVOKED} <= actions, actions


def test_a_non_member_or_a_foreign_scope_is_a_400_saying_why(as_alice, charlie) -> None:
    stranger = as_alice.call("POST", CLIENTS, {"name": "x", "acts_as": "charlie"})
    # Another tenant's account answers as one that exists nowhere (AMB-281): tests/security/test_name_oracles.py.
    assert stranger.status_code == 400 and "No member 'charlie' of tenant-a." in str(stranger.json())
    nobody = as_alice.call("POST", CLIENTS, {"name": "x", "acts_as": "nobody"})
    assert nobody.status_code == 400 and "No member 'nobody'" in str(nobody.json())
    scope = as_alice.call("POST", CLIENTS, {"name": "x", "acts_as": "alice", "scope": "root:all"})
    assert scope.status_code == 400 and "Not a scope of tenant-a: root:all." in str(scope.json())
    assert not ServiceClient.objects.exists()


def test_viewers_and_other_tenants_owners_cannot(as_bob, as_charlie, as_alice, bob) -> None:
    assert as_bob.call("POST", CLIENTS, {"name": "x", "acts_as": "bob"}).status_code == 403
    assert as_bob.call("GET", CLIENTS).status_code == 403
    made = as_alice.call("POST", CLIENTS, {"name": "CI", "acts_as": "bob"}).json()
    assert as_charlie.call("GET", f"{CLIENTS}{made['id']}/").status_code == 404
    assert as_charlie.call("DELETE", f"{CLIENTS}{made['id']}/").status_code == 404
    assert ServiceClient.objects.filter(pk=made["id"]).exists()
