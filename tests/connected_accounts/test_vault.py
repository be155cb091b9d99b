"""The vault's answers without a provider to talk to: a missing connection asks to connect (with a signed
link naming nobody), another tenant's connection of the same name is not the caller's, a link that is
tampered with or made for another provider reads as nothing, and a provider that cannot be reached for a
refresh keeps the connection, says so in our words and is audited (AMB-208, AMB-209)."""

from __future__ import annotations

import datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from audit.models import Action, AuditEvent
from mcp_app.connected_accounts import vault
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Connection, Provider

pytestmark = pytest.mark.django_db(transaction=True)


def provider_of(tenant, token_url: str = "https://127.0.0.1:9/token") -> Provider:
    provider = Provider(
        tenant=tenant, name="gh", display_name="GitHub", authorize_url="https://127.0.0.1:9/authorize",
        token_url=token_url, client_id="c", client_secret=encrypt_secrets({"client_secret": "s"}),
    )  # fmt: skip
    provider.full_clean()
    provider.save()
    return provider


def connect(provider: Provider, user, expired: bool) -> Connection:
    when = timezone.now() + datetime.timedelta(seconds=-5 if expired else 3600)
    return Connection.objects.create(
        tenant=provider.tenant, provider=provider, user=user, expires_at=when,
        tokens=encrypt_secrets({"access_token": f"at-{provider.tenant.slug}", "refresh_token": "rt"}),
    )  # fmt: skip


async def test_no_connection_asks_to_connect_with_a_signed_link_naming_nobody(tenant_a, bob) -> None:
    await sync_to_async(provider_of)(tenant_a)
    with pytest.raises(vault.NotConnected) as asked:
        await vault.access_token(tenant_a.pk, bob.pk, "gh", elicitation_id="e-1")
    assert asked.value.provider == "GitHub"
    url = urlsplit(asked.value.start_url)
    assert url.path == "/t/tenant-a/connections/gh/start" and "bob" not in asked.value.start_url
    payload = vault.read_link(parse_qs(url.query)["link"][0])
    assert payload is not None and payload["t"] == tenant_a.pk and payload["e"] == "e-1"


async def test_a_provider_the_tenant_lacks_is_said_so_instead_of_a_link_to_nowhere(tenant_a, bob) -> None:
    with pytest.raises(vault.ConnectionUnavailable, match="no account provider named 'nope'"):
        await vault.access_token(tenant_a.pk, bob.pk, "nope")


async def test_a_fresh_token_is_handed_out_and_another_tenants_connection_is_not_the_callers(
    tenant_a, tenant_b, bob
) -> None:
    await sync_to_async(provider_of)(tenant_a)
    theirs = await sync_to_async(provider_of)(tenant_b)
    await sync_to_async(connect)(theirs, bob, expired=False)
    with pytest.raises(vault.NotConnected):
        await vault.access_token(tenant_a.pk, bob.pk, "gh")
    assert await vault.access_token(tenant_b.pk, bob.pk, "gh") == "at-tenant-b"


def test_a_tampered_or_foreign_link_reads_as_nothing(tenant_a, bob) -> None:
    link = vault.start_link(tenant_slug="tenant-a", tenant_id=tenant_a.pk, user_id=bob.pk, provider_name="gh")
    token = parse_qs(urlsplit(link).query)["link"][0]
    assert vault.read_link(token) is not None
    assert vault.read_link(token[:-3] + ("abc" if not token.endswith("abc") else "xyz")) is None
    assert vault.read_link("") is None


async def test_an_unreachable_provider_keeps_the_connection_says_why_and_is_audited(tenant_a, bob) -> None:
    provider = await sync_to_async(provider_of)(tenant_a)
    await sync_to_async(connect)(provider, bob, expired=True)
    with pytest.raises(vault.ConnectionUnavailable) as failed:
        await vault.access_token(tenant_a.pk, bob.pk, "gh")
    assert failed.value.message.startswith("GitHub: ") and "rt" not in failed.value.message
    assert await Connection.objects.filter(user=bob).aexists()
    event = await AuditEvent.objects.aget(action=Action.CONNECTION_REFRESH_FAILED)
    assert event.detail["provider"] == "gh" and event.actor_id == bob.pk
