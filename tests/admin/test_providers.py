"""The connected accounts' admin (AMB-207, AMB-211): owners add providers (the client secret write-only)
and see who is connected (never a token), and their Delete of a connection is a Disconnect; viewers
see neither, and another tenant's owner gets a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from audit.models import Action, AuditEvent
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Connection, Provider

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "the-provider-client-secret-31c"
TOKEN = "a-connected-access-token-9d0e"


def url(model: str, name: str, *args: object) -> str:
    return reverse(f"admin:mcp_app_{model}_{name}", args=args)


@pytest.fixture
def connected(tenant_a, bob) -> Connection:
    provider = Provider.objects.create(
        tenant=tenant_a, name="gh", display_name="GitHub", authorize_url="https://gh.example.com/authorize",
        token_url="https://gh.example.com/token", revocation_url="https://127.0.0.1:9/revoke", client_id="c",
        client_secret=encrypt_secrets({"client_secret": SECRET}),
    )  # fmt: skip
    return Connection.objects.create(
        tenant=tenant_a, provider=provider, user=bob, tokens=encrypt_secrets({"access_token": TOKEN})
    )


def test_an_owner_adds_a_provider_whose_secret_is_stored_sealed_and_never_shown(
    client, alice, tenant_a
) -> None:
    client.force_login(alice)
    data = {
        "tenant": tenant_a.pk, "name": "github", "display_name": "GitHub",
        "discovery_url": "https://github.example.com", "client_id": "Iv1.x", "new_client_secret": SECRET,
    }  # fmt: skip
    assert client.post(url("provider", "add"), data).status_code == 302
    provider = Provider.objects.get(name="github")
    assert SECRET not in provider.client_secret and provider.secret() == SECRET
    page = client.get(url("provider", "change", provider.pk)).content.decode()
    assert SECRET not in page and "set." in page and "Nobody has connected an account yet." in page
    missing = client.post(url("provider", "add"), {**data, "name": "bare", "discovery_url": ""})
    assert "discovery URL, or both its authorization and token endpoints" in missing.content.decode()


def test_an_owner_sees_who_is_connected_never_a_token_and_deleting_is_disconnecting(
    client, alice, connected
) -> None:
    client.force_login(alice)
    page = client.get(url("provider", "change", connected.provider.pk)).content.decode()
    assert "bob (since" in page and TOKEN not in page
    listing = client.get(url("connection", "changelist")).content.decode()
    assert "bob" in listing and TOKEN not in listing
    assert client.post(url("connection", "delete", connected.pk), {"post": "yes"}).status_code == 302
    assert not Connection.objects.exists()
    removed = AuditEvent.objects.get(action=Action.CONNECTION_REMOVED)
    assert removed.detail == {"provider": "gh", "user": "bob", "reason": "disconnected"}
    assert removed.actor == alice


def test_viewers_see_neither_and_another_tenants_owner_gets_a_404(client, bob, charlie, connected) -> None:
    client.force_login(bob)
    assert client.get(url("provider", "changelist")).status_code == 403
    assert client.get(url("connection", "changelist")).status_code == 403
    client.force_login(charlie)
    assert client.get(url("provider", "change", connected.provider.pk)).status_code == 404
    assert client.get(url("connection", "change", connected.pk)).status_code == 404
    assert client.post(url("connection", "delete", connected.pk), {"post": "yes"}).status_code == 404
    assert Connection.objects.exists()


def test_the_providers_page_shows_the_redirect_uri_to_register_there(
    client, alice, tenant_a, settings
) -> None:
    provider = Provider.objects.create(
        tenant=tenant_a, name="gh", display_name="GH", discovery_url="https://gh.example", client_id="c"
    )
    client.force_login(alice)
    page = client.get(reverse("admin:mcp_app_provider_change", args=[provider.pk])).content.decode()
    assert (
        f"<code id='redirect-uri'>{settings.MCP_PUBLIC_URL}/t/tenant-a/connections/gh/callback</code>" in page
    )
    assert "shows the redirect URI" in client.get(reverse("admin:mcp_app_provider_add")).content.decode()
