"""`/api-tokens`: a person makes, uses and revokes their own `manage` tokens (shown once, audited)."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from audit.models import Action, AuditEvent
from tenants.models import Tenant
from tests.api.conftest import ApiClient
from tests.transport.support import BOTH, call

pytestmark = pytest.mark.django_db(transaction=True)


def make_token(client: Client, days: int = 30) -> str:
    page = client.post("/api-tokens", {"action": "create", "days": days})
    assert page.status_code == 200
    found = re.search(r'<code id="new-token">([^<]+)</code>', page.content.decode())
    assert found, "the new token is shown once"
    return found.group(1)


def test_signed_out_visitors_are_sent_to_sign_in(client):
    response = client.get("/api-tokens")
    assert response.status_code == 302 and response["Location"].startswith("/oauth/login")


def test_a_token_made_on_the_page_opens_the_api_with_its_owners_roles_and_is_shown_only_once(
    alice, tenant_a, tenant_b
):
    browser = Client()
    browser.force_login(alice)
    token = make_token(browser)
    listed = ApiClient(token=token).call("GET", "/api/v1/tenants/")
    assert listed.status_code == 200
    assert [t["slug"] for t in listed.json()["results"]] == ["tenant-a"]
    again = browser.get("/api-tokens").content.decode()
    assert token not in again and "valid until" in again
    event = AuditEvent.objects.get(action=Action.TOKEN_ISSUED)
    assert event.actor_username == alice.username and token not in str(event.detail)


async def test_a_token_does_not_open_an_oauth_tenants_mcp_endpoint(alice, tenant_a):
    await Tenant.objects.filter(pk=tenant_a.pk).aupdate(auth_mode="oauth")
    browser = Client()
    await sync_to_async(browser.force_login)(alice)
    token = await sync_to_async(make_token)(browser)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {"accept": BOTH, "content-type": "application/json", "authorization": f"Bearer {token}"}
    refused = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert refused.status == 401  # a token of the API's audience is no MCP token (AMB-51)


def test_a_revoked_token_stops_at_once_and_only_its_owner_can_revoke_it(alice, charlie, tenant_a):
    owner = Client()
    owner.force_login(alice)
    token = make_token(owner)
    token_id = re.search(r'name="token" value="(\d+)"', owner.get("/api-tokens").content.decode()).group(1)
    stranger = Client()
    stranger.force_login(charlie)
    assert stranger.post("/api-tokens", {"action": "revoke", "token": token_id}).status_code == 404
    assert ApiClient(token=token).call("GET", "/api/v1/tenants/").status_code == 200
    assert owner.post("/api-tokens", {"action": "revoke", "token": token_id}).status_code == 302
    assert ApiClient(token=token).call("GET", "/api/v1/tenants/").status_code == 401
    assert AuditEvent.objects.filter(action=Action.TOKEN_REVOKED, actor_username=alice.username).count() == 1


def test_a_lifetime_off_the_list_is_refused_in_words(alice):
    browser = Client()
    browser.force_login(alice)
    refused = browser.post("/api-tokens", {"action": "create", "days": "9999"})
    assert refused.status_code == 400 and b"Choose how long" in refused.content
