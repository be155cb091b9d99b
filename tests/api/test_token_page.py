"""`/api-tokens`: a person makes, uses and revokes their own `manage` tokens (shown once, audited)."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from audit.models import Action, AuditEvent
from mcp_app.api.tokens import issue_manage_token
from mcp_app.models import ApiToken
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
    assert token not in again
    assert "Expires" in again
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


def test_a_token_has_a_name_its_expiry_its_last_use_and_a_copy_button(alice, tenant_a):
    """AMB-237: named on the page, listed with its expiry and last use, revoked from the admin too."""
    browser = Client()
    browser.force_login(alice)
    made = browser.post("/api-tokens", {"action": "create", "days": 7, "name": "nightly CI"})
    html = made.content.decode()
    assert 'data-copy="new-token"' in html and "connect/copy.js" in html
    token = re.search(r'<code id="new-token">([^<]+)</code>', html).group(1)
    listed = browser.get("/api-tokens").content.decode()
    assert "nightly CI" in listed and "never" in listed
    assert ApiClient(token=token).call("GET", "/api/v1/tenants/").status_code == 200
    row = ApiToken.objects.get(name="nightly CI")
    assert row.last_used is not None
    assert row.token.expires.date() == (timezone.now() + timedelta(days=7)).date()
    assert "never" not in browser.get("/api-tokens").content.decode()
    event = AuditEvent.objects.filter(action=Action.TOKEN_ISSUED).latest("id")
    assert event.detail["name"] == "nightly CI"

    # The admin lists it (its owner sees their own) and revokes it.
    admin_list = browser.get("/admin/mcp_app/apitoken/")
    assert admin_list.status_code == 200 and "nightly CI" in admin_list.content.decode()
    revoked = browser.post(
        "/admin/mcp_app/apitoken/", {"action": "revoke", "_selected_action": [row.pk]}, follow=True
    )
    assert "1 token(s) revoked" in revoked.content.decode()
    assert ApiClient(token=token).call("GET", "/api/v1/tenants/").status_code == 401
    assert not ApiToken.objects.filter(pk=row.pk).exists()


def test_the_admin_shows_a_person_only_their_own_tokens(alice, bob, tenant_a):
    issue_manage_token(alice, name="alice's script")
    issue_manage_token(bob, name="bob's script")
    browser = Client()
    browser.force_login(bob)
    page = browser.get("/admin/mcp_app/apitoken/").content.decode()
    assert "bob&#x27;s script" in page and "alice" not in page
    other = ApiToken.objects.get(name="alice's script")
    assert browser.get(f"/admin/mcp_app/apitoken/{other.pk}/change/").status_code in (302, 404)


def test_the_command_names_its_token(alice):
    out = StringIO()
    call_command("api_token", "alice", "--name", "deploy", stdout=out)
    assert ApiToken.objects.get(name="deploy").token.user == alice
