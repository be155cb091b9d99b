"""A tenant's own identity provider through the API's settings endpoint (AMB-203): set, checked, its
introspection secret write-only."""

from __future__ import annotations

import pytest

from mcp_app.handlers.secrets import decrypt_secrets
from tenants.models import Tenant
from tests.api.conftest import API

pytestmark = pytest.mark.django_db

INTROSPECTED = {
    "issuer": "https://idp.example.com",
    "introspection_url": "https://idp.example.com/introspect",
    "client_id": "mcp-rs",
    "audience": "api://mcp",
}


def test_the_owner_sets_an_identity_provider_whose_secret_is_never_returned(as_alice, tenant_a):
    body = {"auth_mode": "oauth", "identity": INTROSPECTED, "identity_client_secret": "s3cret-rs"}
    response = as_alice.call("PATCH", f"{API}/tenant-a/", body)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["identity"] == INTROSPECTED and answer["identity_client_secret_set"] is True
    assert "s3cret-rs" not in response.content.decode()
    stored = Tenant.objects.get(pk=tenant_a.pk)
    assert decrypt_secrets(stored.identity_client_secret) == {"client_secret": "s3cret-rs"}
    read = as_alice.call("GET", f"{API}/tenant-a/")
    assert (
        "s3cret-rs" not in read.content.decode()
        and stored.identity_client_secret not in read.content.decode()
    )
    # Leaving introspection drops the secret of its client.
    jwks = {
        "issuer": "https://idp.example.com",
        "jwks_uri": "https://idp.example.com/jwks",
        "audience": "api://mcp",
    }
    assert (
        as_alice.call("PATCH", f"{API}/tenant-a/", {"identity": jwks}).json()["identity_client_secret_set"]
        is False
    )


@pytest.mark.parametrize(
    ("identity", "field", "words"),
    [
        (
            {"issuer": "https://idp.example.com", "jwks_uri": "https://idp.example.com/jwks"},
            "identity",
            "audience is required",
        ),
        (INTROSPECTED, "identity_client_secret", "secret is required"),
        ({**INTROSPECTED, "algorithms": ["none"]}, "identity", "never none"),
        ({**INTROSPECTED, "introspection_url": "https://10.0.0.5/introspect"}, "identity", "a private address"),
    ],
)
def test_an_identity_that_cannot_work_is_a_400_naming_the_field(as_alice, tenant_a, identity, field, words):
    response = as_alice.call("PATCH", f"{API}/tenant-a/", {"identity": identity})
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert words in response.content.decode()
    assert Tenant.objects.get(pk=tenant_a.pk).identity == {}
