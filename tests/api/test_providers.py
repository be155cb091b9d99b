"""OAuth providers of connected accounts through the API (AMB-207): owners write, the client secret is
write-only (stored encrypted, `client_secret_set` says whether), members read, another tenant's
provider is a 404 like a missing one, and a provider with neither discovery nor endpoints is a 400."""

from __future__ import annotations

import pytest

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Provider
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
PROVIDERS = f"{API}/tenant-a/providers/"
GITHUB = {
    "name": "github",
    "display_name": "GitHub",
    "authorize_url": "https://github.com/login/oauth/authorize",
    "token_url": "https://github.com/login/oauth/access_token",
    "client_id": "Iv1.abc",
    "client_secret": "s3cret-value-of-github",
    "scopes": "repo read:user",
}


def test_an_owner_adds_a_provider_whose_secret_is_never_returned(as_alice) -> None:
    made = as_alice.call("POST", PROVIDERS, GITHUB)
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["client_secret_set"] is True and "client_secret" not in body and body["connected"] == 0
    assert body["redirect_uri"].endswith("/t/tenant-a/connections/github/callback")
    row = Provider.objects.get(pk=body["id"])
    assert "s3cret" not in row.client_secret and decrypt_secrets(row.client_secret) == {
        "client_secret": "s3cret-value-of-github"
    }
    # Absent keeps the secret, "" removes it.
    kept = as_alice.call("PATCH", f"{PROVIDERS}{body['id']}/", {"display_name": "GitHub.com"})
    assert kept.status_code == 200 and kept.json()["client_secret_set"] is True
    cleared = as_alice.call("PATCH", f"{PROVIDERS}{body['id']}/", {"client_secret": ""})
    assert cleared.json()["client_secret_set"] is False
    listed = as_alice.call("GET", PROVIDERS).json()["results"]
    assert [row["name"] for row in listed] == ["github"] and "s3cret" not in str(listed)


def test_without_discovery_or_endpoints_it_is_a_400_saying_what_is_missing(as_alice) -> None:
    answer = as_alice.call("POST", PROVIDERS, {"name": "x", "display_name": "X", "client_id": "c"})
    assert answer.status_code == 400
    assert "discovery URL, or both its authorization and token endpoints" in str(answer.json())
    twice = as_alice.call("POST", PROVIDERS, GITHUB), as_alice.call("POST", PROVIDERS, GITHUB)
    assert twice[1].status_code == 400 and not Provider.objects.filter(name="x").exists()


def test_viewers_read_and_other_tenants_see_nothing(as_alice, as_bob, as_charlie) -> None:
    made = as_alice.call("POST", PROVIDERS, GITHUB).json()
    assert as_bob.call("GET", PROVIDERS).status_code == 200
    assert as_bob.call("PATCH", f"{PROVIDERS}{made['id']}/", {"display_name": "x"}).status_code == 403
    assert as_charlie.call("GET", f"{PROVIDERS}{made['id']}/").status_code == 404
    # Through charlie's own tenant: alice's provider's id answers as a missing one.
    theirs = f"{API}/tenant-b/providers/{made['id']}/"
    missing = f"{API}/tenant-b/providers/999999/"
    for method in ("GET", "DELETE"):
        assert as_charlie.call(method, theirs).json() == as_charlie.call(method, missing).json()
        assert as_charlie.call(method, theirs).status_code == 404
    assert Provider.objects.filter(pk=made["id"]).exists()
