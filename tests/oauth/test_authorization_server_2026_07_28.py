"""What MCP 2026-07-28 asks of the authorization server: RFC 9207 `iss` advertised and sent
(changelog minor change 7) and the OIDC `application_type` at dynamic registration (minor change 8)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from mcp.client.auth.utils import create_client_registration_request
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from oauth2_provider.models import Application

from mcp_app.oauth import resources
from tests.oauth.as_support import (
    LOOPBACK_REDIRECT,
    authorize_params,
    canonical,
    consent,
    pkce_pair,
    redirect_params,
    register,
    registered_public_client,
)

METADATA_PATHS = ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]


def _management(client, registered: dict, method: str = "get", body: dict | None = None):
    """An RFC 7592 request to the client's registration_client_uri with its registration access token."""
    path = urlsplit(registered["registration_client_uri"]).path
    auth = {"HTTP_AUTHORIZATION": "Bearer " + registered["registration_access_token"]}
    if body is None:
        return getattr(client, method)(path, **auth)
    return getattr(client, method)(path, data=json.dumps(body), content_type="application/json", **auth)


# --- RFC 9207 iss (minor change 7) ---------------------------------------------------------------


@pytest.mark.parametrize("path", METADATA_PATHS)
def test_metadata_advertises_iss_in_authorization_responses_at_both_discovery_urls(client, db, path):
    data = client.get(path).json()
    assert data["authorization_response_iss_parameter_supported"] is True
    assert data["issuer"] == resources.issuer()


@pytest.mark.parametrize("path", METADATA_PATHS)
def test_a_successful_authorization_response_carries_the_advertised_issuer_as_iss(client, member, path):
    # The advertisement is only honest if the response really carries iss, equal to the metadata's
    # issuer character for character (clients compare without normalising, RFC 9207 §2.4).
    issuer = client.get(path).json()["issuer"]
    registered = registered_public_client(client)
    _, challenge = pkce_pair()
    client.force_login(member)
    back = redirect_params(
        consent(client, authorize_params(registered["client_id"], challenge, resource=canonical("vault")))
    )
    assert back["code"] and back["state"] == "st-123"
    assert back["iss"] == issuer


def test_an_error_authorization_response_carries_iss_too(client, member):
    registered = registered_public_client(client)
    _, challenge = pkce_pair()
    client.force_login(member)
    back = redirect_params(
        consent(
            client,
            authorize_params(registered["client_id"], challenge, resource=canonical("vault")),
            allow=False,
        )
    )
    assert back["error"] == "access_denied" and back["iss"] == resources.issuer()


# --- application_type (minor change 8) -----------------------------------------------------------


@pytest.mark.parametrize(
    "redirect_uri", [LOOPBACK_REDIRECT, "http://localhost:51234/callback", "com.example.app:/oauth2redirect"]
)
def test_registration_accepts_a_native_client_with_loopback_or_private_use_redirects(
    client, db, redirect_uri
):
    response = register(client, application_type="native", redirect_uris=[redirect_uri])
    assert response.status_code == 201, response.content
    assert response.json()["application_type"] == "native"


@pytest.mark.parametrize("redirect_uri", ["https://app.example.com/oauth/callback", LOOPBACK_REDIRECT])
def test_registration_accepts_a_web_client_and_does_not_tie_redirect_rules_to_the_type(
    client, db, redirect_uri
):
    # OIDC forbids http/localhost for web clients only with the implicit grant, which is never allowed
    # here; the same redirect rules (AMB-28) apply to both types.
    response = register(client, application_type="web", redirect_uris=[redirect_uri])
    assert response.status_code == 201, response.content
    assert response.json()["application_type"] == "web"


@pytest.mark.parametrize("sent", [{}, {"application_type": None}])
def test_registration_without_an_application_type_is_stored_and_echoed_as_web(client, db, sent):
    # OIDC Registration §2: omitted means "web". Clients older than 2026-07-28 send none, with
    # loopback redirect URIs, and keep registering.
    response = register(client, **sent)
    assert response.status_code == 201, response.content
    assert response.json()["application_type"] == "web"
    assert _management(client, response.json()).json()["application_type"] == "web"


@pytest.mark.parametrize("value", ["toaster", "Native", "", ["native"], {"type": "web"}, 1, True])
def test_registration_refuses_an_unknown_application_type_with_a_readable_error(client, db, value):
    response = register(client, application_type=value)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_client_metadata"
    description = body["error_description"]
    assert "application_type" in description and json.dumps(value)[:30] in description
    assert '"native"' in description and '"web"' in description
    assert not Application.objects.exists()


def test_a_long_unknown_application_type_is_quoted_shortened_in_the_error(client, db):
    response = register(client, application_type="x" * 500)
    assert response.status_code == 400
    assert len(response.json()["error_description"]) < 250


def test_registration_read_and_update_return_the_stored_application_type(client, db):
    registered = register(client, application_type="native").json()
    read = _management(client, registered)
    assert read.status_code == 200 and read.json()["application_type"] == "native"
    updated = _management(
        client,
        registered,
        "put",
        {
            "client_id": registered["client_id"],
            "redirect_uris": ["https://app.example.com/cb"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        },
    )
    assert updated.status_code == 200, updated.content
    assert updated.json()["application_type"] == "web"
    # The update rotates the registration access token; read again with the new one.
    assert _management(client, updated.json()).json()["application_type"] == "web"


def test_registration_update_refuses_an_unknown_application_type(client, db):
    registered = register(client, application_type="native").json()
    refused = _management(
        client,
        registered,
        "put",
        {
            "client_id": registered["client_id"],
            "redirect_uris": [LOOPBACK_REDIRECT],
            "application_type": "tv",
        },
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"
    assert _management(client, registered).json()["application_type"] == "native"


def test_the_official_sdk_client_registers_as_native_with_a_loopback_redirect(client, db):
    metadata = OAuthClientMetadata(
        redirect_uris=[LOOPBACK_REDIRECT], client_name="SDK client", token_endpoint_auth_method="none"
    )
    request = create_client_registration_request(None, metadata, "http://testserver")
    sent = json.loads(request.content)
    assert sent["application_type"] == "native"  # the SDK's default since MCP 2026-07-28
    response = client.post("/oauth/register", data=request.content, content_type="application/json")
    assert response.status_code == 201, response.content
    info = OAuthClientInformationFull.model_validate(response.json())
    assert info.application_type == "native"
    assert [str(uri) for uri in info.redirect_uris] == [LOOPBACK_REDIRECT]


@pytest.mark.parametrize(
    "sent", [{"grant_types": [["authorization_code"]]}, {"response_types": [{"code": True}]}]
)
def test_registration_refuses_non_string_grant_or_response_types_as_client_metadata_not_a_crash(
    client, db, sent
):
    # Like a list-valued application_type, these once reached a set() and raised (500).
    response = register(client, **sent)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
