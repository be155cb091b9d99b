"""Clients registered, revoked and deleted, consent granted and revoked, tokens revoked: each recorded once."""

from __future__ import annotations

import pytest
from django.test import Client
from oauth2_provider.models import get_application_model

from audit.models import Action, AuditEvent
from tests.api.conftest import API, ApiClient
from tests.audit.conftest import ADDRESS, assert_no_secret, only_event
from tests.oauth.as_support import (
    authorize_params,
    canonical,
    consent,
    exchange,
    pkce_pair,
    redirect_params,
    registered_public_client,
)
from tests.oauth.rs_support import issue_token, make_application

pytestmark = pytest.mark.django_db


@pytest.fixture
def oauth_tenant(tenant_a):
    tenant_a.auth_mode = "oauth"
    tenant_a.save()
    return tenant_a


def test_a_registered_client_is_recorded_with_the_address(committed):
    with committed():
        client_id = registered_public_client(Client(REMOTE_ADDR=ADDRESS))["client_id"]
    event = only_event(Action.CLIENT_REGISTERED)
    assert (event.client_id, event.source_address, event.actor) == (client_id, ADDRESS, None)
    assert event.detail["name"] == "Test client"


def test_consent_granted_then_the_token_revoked_are_recorded_with_member_tenant_and_client(alice, oauth_tenant, committed):
    client_id = registered_public_client(Client())["client_id"]
    browser = Client(REMOTE_ADDR=ADDRESS)
    browser.force_login(alice)
    verifier, challenge = pkce_pair()
    with committed():
        code = redirect_params(consent(browser, authorize_params(client_id, challenge, resource=canonical("tenant-a"))))["code"]
    granted = only_event(Action.CONSENT_GRANTED)
    assert (granted.actor, granted.tenant, granted.client_id, granted.source_address) == (
        alice, oauth_tenant, client_id, ADDRESS
    )
    token = exchange(Client(), client_id, code, verifier).json()
    with committed():
        response = Client(REMOTE_ADDR=ADDRESS).post(
            "/oauth/revoke", {"token": token["access_token"], "client_id": client_id}
        )
    assert response.status_code == 200
    revoked = only_event(Action.TOKEN_REVOKED)
    assert (revoked.actor, revoked.tenant, revoked.client_id, revoked.source_address) == (
        alice, oauth_tenant, client_id, ADDRESS
    )
    assert revoked.detail == {"token_type": "access_token"}
    for event in (granted, revoked):
        assert_no_secret(event, code, verifier, token["access_token"], token["refresh_token"], "alice-pw-123")


def test_revoking_an_unknown_token_records_nothing(committed):
    client_id = registered_public_client(Client())["client_id"]
    with committed():
        Client().post("/oauth/revoke", {"token": "no-such-token", "client_id": client_id})
    assert not AuditEvent.objects.filter(action=Action.TOKEN_REVOKED).exists()


def test_revoking_a_client_in_the_admin_is_recorded_with_the_superuser(admin_user, alice, tenant_a, committed):
    application = make_application("Leaky client")
    secret = issue_token(alice, tenant_a, application)
    browser = Client(REMOTE_ADDR=ADDRESS)
    browser.force_login(admin_user)
    url = "/admin/oauth2_provider/application/"
    with committed():
        browser.post(url, {"action": "revoke_selected", "_selected_action": [application.pk]})
    event = only_event(Action.CLIENT_REVOKED)
    assert (event.actor, event.client_id, event.source_address) == (admin_user, application.client_id, ADDRESS)
    assert event.detail["access_tokens"] == 1
    assert_no_secret(event, secret)


def test_deleting_a_client_in_the_admin_is_recorded(admin_user, committed):
    application = make_application("Old client")
    browser = Client(REMOTE_ADDR=ADDRESS)
    browser.force_login(admin_user)
    with committed():
        response = browser.post(f"/admin/oauth2_provider/application/{application.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not get_application_model().objects.filter(pk=application.pk).exists()
    event = only_event(Action.CLIENT_DELETED)
    assert (event.actor, event.client_id, event.source_address) == (admin_user, application.client_id, ADDRESS)


def test_an_owner_revoking_a_clients_consent_through_the_api_is_recorded_for_the_tenant(alice, tenant_a, committed):
    application = make_application()
    secret = issue_token(alice, tenant_a, application)
    with committed():
        response = ApiClient(alice).call("DELETE", f"{API}/tenant-a/clients/{application.pk}/", REMOTE_ADDR=ADDRESS)
    assert response.status_code == 204
    event = only_event(Action.CONSENT_REVOKED)
    assert (event.actor, event.tenant, event.client_id, event.source_address) == (
        alice, tenant_a, application.client_id, ADDRESS
    )
    assert_no_secret(event, secret)
