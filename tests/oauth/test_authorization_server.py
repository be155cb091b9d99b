"""The authorization server: metadata, dynamic registration, the code flow bound to tenants (AU-20..37)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from mcp_app.models import Tool
from mcp_app.oauth import ratelimit, resources
from tenants.models import Membership, Role, Tenant
from tests.oauth.as_support import (
    LOOPBACK_REDIRECT,
    authorize_params,
    authorize_url,
    canonical,
    consent,
    exchange,
    pkce_pair,
    redirect_params,
    register,
    registered_public_client,
)

BASE_SCOPES = ["mcp:prompts", "mcp:resources", "mcp:tools"]


def issued():
    """Access tokens issued to users (dynamic registration also stores its registration token)."""
    return AccessToken.objects.filter(user__isnull=False)


@pytest.fixture
def secure(db) -> Tenant:
    tenant = Tenant.objects.create(slug="vault", name="vault", title="The Vault", auth_mode="oauth")
    Tool.objects.create(tenant=tenant, name="open_safe", handler="template", required_scope="vault:open")
    return tenant


@pytest.fixture
def other_secure(db) -> Tenant:
    return Tenant.objects.create(slug="annex", name="annex", title="The Annex", auth_mode="oauth")


@pytest.fixture
def dave(django_user_model, secure, other_secure):
    user = django_user_model.objects.create_user("dave", "dave@example.com", "dave-pw-123")
    Membership.objects.create(user=user, tenant=secure, role=Role.VIEWER)
    Membership.objects.create(user=user, tenant=other_secure, role=Role.OWNER)
    return user


@pytest.fixture
def eve(django_user_model, db):
    return django_user_model.objects.create_user("eve", "eve@example.com", "eve-pw-123")


@pytest.fixture
def public_client(client, db) -> dict:
    return registered_public_client(
        client, logo_uri="https://client.example/logo.png", client_uri="https://client.example"
    )


def _code_for(client, dave, client_id: str, resource: str | None, **extra: str) -> tuple[str, str]:
    verifier, challenge = pkce_pair()
    client.force_login(dave)
    response = consent(client, authorize_params(client_id, challenge, resource=resource, **extra))
    params = redirect_params(response)
    assert "code" in params, params
    return params["code"], verifier


# --- Metadata (AU-20, AU-60) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]
)
def test_au20_metadata_document_lists_every_endpoint_and_capability(client, db, path):
    response = client.get(path)
    assert response.status_code == 200
    data = response.json()
    issuer = resources.issuer()
    assert data["issuer"] == issuer
    assert data["authorization_endpoint"] == issuer + "/oauth/authorize"
    assert data["token_endpoint"] == issuer + "/oauth/token"
    assert data["revocation_endpoint"] == issuer + "/oauth/revoke"
    assert data["introspection_endpoint"] == issuer + "/oauth/introspect"
    assert data["registration_endpoint"] == issuer + "/oauth/register"
    assert data["code_challenge_methods_supported"] == ["S256"]
    assert data["response_types_supported"] == ["code"]
    assert data["grant_types_supported"] == ["authorization_code", "refresh_token", "client_credentials"]
    assert data["token_endpoint_auth_methods_supported"] == [
        "none",
        "client_secret_basic",
        "client_secret_post",
    ]
    assert sorted(data["scopes_supported"]) == BASE_SCOPES
    assert data["client_id_metadata_document_supported"] is True
    assert data["authorization_response_iss_parameter_supported"] is True


def test_au60_metadata_issuer_is_the_origin_of_the_public_url(client, db, settings):
    settings.MCP_PUBLIC_URL = "https://MCP.Example.com"
    settings.ALLOWED_HOSTS = ["mcp.example.com"]
    data = client.get("/.well-known/oauth-authorization-server", HTTP_HOST="mcp.example.com").json()
    assert data["issuer"] == "https://mcp.example.com"
    assert data["token_endpoint"] == "https://mcp.example.com/oauth/token"


# --- Dynamic client registration (AU-25, AU-27, AU-32) -----------------------------------------


def test_au25_public_client_registers_without_credentials_and_gets_no_secret(client, db):
    response = register(
        client, client_name="Claude", application_type="native", logo_uri="https://claude.example/logo.png"
    )
    assert response.status_code == 201
    data = response.json()
    assert data["client_id"] and "client_secret" not in data
    assert data["token_endpoint_auth_method"] == "none"
    assert data["redirect_uris"] == [LOOPBACK_REDIRECT]
    assert data["grant_types"] == ["authorization_code", "refresh_token"]
    assert data["application_type"] == "native"
    application = Application.objects.get(client_id=data["client_id"])
    assert (application.client_type, application.registration_source, application.skip_authorization) == (
        "public",
        "dcr",
        False,
    )


def test_au25_confidential_client_gets_a_secret_that_never_expires(client, db):
    response = register(
        client, token_endpoint_auth_method="client_secret_basic", redirect_uris=["https://app.example/cb"]
    )
    assert response.status_code == 201
    data = response.json()
    assert data["client_secret"] and data["client_secret_expires_at"] == 0
    assert Application.objects.get(client_id=data["client_id"]).client_type == "confidential"


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://localhost:51234/callback",
        "http://127.0.0.1/cb",
        "http://[::1]:8080/cb",
        "https://app.example.com/oauth/callback?x=1",
        "com.example.app:/oauth2redirect",
        "cursor://anysphere.cursor-retrieval/oauth/callback",
    ],
)
def test_au32_registration_accepts_https_loopback_and_private_use_redirects(client, db, redirect_uri):
    assert register(client, redirect_uris=[redirect_uri]).status_code == 201


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["data:text/html,<script>alert(1)</script>"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["file:///etc/passwd"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://evil.example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://app.example.com/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://user:pw@app.example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": "https://app.example.com/cb"}, "invalid_redirect_uri"),
        (
            {"redirect_uris": [LOOPBACK_REDIRECT], "grant_types": ["client_credentials"]},
            "invalid_client_metadata",
        ),
        ({"redirect_uris": [LOOPBACK_REDIRECT], "grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"redirect_uris": [LOOPBACK_REDIRECT], "response_types": ["token"]}, "invalid_client_metadata"),
        ({"redirect_uris": [LOOPBACK_REDIRECT], "application_type": "toaster"}, "invalid_client_metadata"),
        (
            {"redirect_uris": [LOOPBACK_REDIRECT], "logo_uri": "javascript:alert(1)"},
            "invalid_client_metadata",
        ),
        (
            {"redirect_uris": [LOOPBACK_REDIRECT], "token_endpoint_auth_method": "private_key_jwt"},
            "invalid_client_metadata",
        ),
    ],
)
def test_au25_bad_registration_metadata_gets_the_rfc7591_error(client, db, body, error):
    response = client.post("/oauth/register", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert response.json()["error_description"]
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{not json", "valid JSON"),
        # AMB-115: DOT's json.loads recursed into a 500 on this public, unauthenticated endpoint.
        ('{"redirect_uris": ' + "[" * 5_000 + "]" * 5_000 + "}", "nested deeper than 64 levels"),
        (b'{"client_name": "\xff"}', "UTF-8"),
    ],
    ids=["not JSON", "5,000 deep", "not UTF-8"],
)
def test_au25_registration_body_that_is_not_json_is_invalid_client_metadata(client, db, body, says):
    response = client.post("/oauth/register", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert says in response.json()["error_description"]


def test_au25_oversized_registration_body_is_refused_with_413(client, db, settings):
    body = {"redirect_uris": [LOOPBACK_REDIRECT], "client_name": "x", "padding": "y" * 20_000}
    response = client.post("/oauth/register", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"] == "invalid_client_metadata"
    assert not Application.objects.exists()


@pytest.fixture
def one_minute(monkeypatch):
    """Keep the clock inside one minute: the limit counts per minute, and a run that crossed a minute's
    end would start counting again (a test that failed about once in sixty runs)."""
    start = (int(time.time()) // 60) * 60 + 10.0
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: start, monotonic=time.monotonic))


def test_au27_registration_is_rate_limited_per_address_with_retry_after(client, db, settings, one_minute):
    settings.MCP_OAUTH_REGISTRATIONS_PER_MINUTE = 3
    statuses = [register(client).status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    refused = register(client)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"] == "too_many_requests"


def test_au27_another_address_has_its_own_registration_budget(client, db, settings, one_minute):
    settings.MCP_OAUTH_REGISTRATIONS_PER_MINUTE = 1
    assert register(client).status_code == 201
    assert register(client).status_code == 429
    other = client.post(
        "/oauth/register",
        data=json.dumps({"redirect_uris": [LOOPBACK_REDIRECT], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
        REMOTE_ADDR="198.51.100.7",
    )
    assert other.status_code == 201


def test_the_token_endpoint_is_rate_limited_per_address_apart_from_registration(
    client, db, settings, one_minute
):
    settings.MCP_OAUTH_TOKEN_REQUESTS_PER_MINUTE = 2
    settings.MCP_OAUTH_REGISTRATIONS_PER_MINUTE = 5
    bad_grant = {"grant_type": "authorization_code", "code": "nope", "client_id": "nobody"}
    statuses = [client.post("/oauth/token", bad_grant).status_code for _ in range(3)]
    assert 429 not in statuses[:2] and statuses[2] == 429  # the first two get OAuth's own error
    refused = client.post("/oauth/token", bad_grant)
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"] == "too_many_requests"
    assert register(client).status_code == 201  # registration keeps its own budget
    other = client.post("/oauth/token", bad_grant, REMOTE_ADDR="198.51.100.7")
    assert other.status_code != 429


# --- Authorization code flow (AU-31..37) -------------------------------------------------------


def test_au34_full_code_flow_binds_the_token_to_the_tenant_and_refresh_rotates(
    client, public_client, dave, secure
):
    verifier, challenge = pkce_pair()
    params = authorize_params(public_client["client_id"], challenge, resource=canonical("vault"))
    # Anonymous: sent to the sign-in page, which names the client.
    login_redirect = client.get(authorize_url(params))
    assert login_redirect.status_code == 302 and login_redirect["Location"].startswith("/oauth/login?next=")
    login_page = client.get(login_redirect["Location"])
    assert b"Test client" in login_page.content
    signed_in = client.post(
        "/oauth/login", {"username": "dave", "password": "dave-pw-123", "next": authorize_url(params)}
    )
    assert signed_in.status_code == 302
    page = client.get(authorize_url(params))
    assert page.status_code == 200
    html = page.content.decode()
    for text in (
        "Test client",
        "The Vault",
        "https://client.example/logo.png",
        "https://client.example",
        "List and call this server",
        canonical("vault"),
        "http://127.0.0.1:33418",
    ):
        assert text in html
    params_back = redirect_params(consent(client, params))
    assert params_back["state"] == "st-123"
    assert params_back["iss"] == resources.issuer()
    grant = Grant.objects.get()
    assert grant.resource == [canonical("vault")]

    token = exchange(
        client, public_client["client_id"], params_back["code"], verifier, resource=canonical("vault")
    )
    assert token.status_code == 200, token.content
    body = token.json()
    assert body["token_type"] == "Bearer" and body["refresh_token"]
    assert set(body["scope"].split()) == set(BASE_SCOPES)
    stored = issued().get()
    assert stored.resource == [canonical("vault")] and stored.user == dave
    assert stored.token == ""  # only the checksum is kept at rest (AU-47)

    refreshed = client.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": body["refresh_token"],
            "client_id": public_client["client_id"],
        },
    )
    assert refreshed.status_code == 200, refreshed.content
    new = refreshed.json()
    assert new["refresh_token"] != body["refresh_token"] and new["access_token"] != body["access_token"]
    assert issued().get().resource == [canonical("vault")]
    # AU-36: the rotated-out refresh token is dead.
    replay = client.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": body["refresh_token"],
            "client_id": public_client["client_id"],
        },
    )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    # The replay revoked the whole family: the newest refresh token is dead too.
    newest = client.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": new["refresh_token"],
            "client_id": public_client["client_id"],
        },
    )
    assert newest.status_code == 400 and not issued().exists()


def test_au34_revocation_deletes_the_token_and_its_refresh_token(client, public_client, dave, secure):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    body = exchange(client, public_client["client_id"], code, verifier).json()
    revoked = client.post(
        "/oauth/revoke", {"token": body["access_token"], "client_id": public_client["client_id"]}
    )
    assert revoked.status_code == 200
    assert not issued().exists()
    again = client.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": body["refresh_token"],
            "client_id": public_client["client_id"],
        },
    )
    assert again.json()["error"] == "invalid_grant"


def test_au34_introspection_answers_a_confidential_client_about_its_own_tokens_only(client, dave, secure, db):
    reg = register(client, token_endpoint_auth_method="client_secret_post").json()
    other = register(client, token_endpoint_auth_method="client_secret_post").json()
    code, verifier = _code_for(client, dave, reg["client_id"], canonical("vault"))
    token = exchange(client, reg["client_id"], code, verifier, client_secret=reg["client_secret"]).json()
    mine = client.post(
        "/oauth/introspect",
        {
            "token": token["access_token"],
            "client_id": reg["client_id"],
            "client_secret": reg["client_secret"],
        },
    ).json()
    assert (
        mine["active"] is True
        and mine["aud"] == [canonical("vault")]
        and mine["client_id"] == reg["client_id"]
    )
    theirs = client.post(
        "/oauth/introspect",
        {
            "token": token["access_token"],
            "client_id": other["client_id"],
            "client_secret": other["client_secret"],
        },
    ).json()
    assert theirs == {"active": False}
    anonymous = client.post("/oauth/introspect", {"token": token["access_token"]})
    assert anonymous.status_code == 401
    assert client.get("/oauth/introspect", {"token": token["access_token"]}).status_code in (401, 405)


def test_au34_token_request_naming_another_tenant_is_invalid_target(
    client, public_client, dave, secure, other_secure
):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    response = exchange(client, public_client["client_id"], code, verifier, resource=canonical("annex"))
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"
    assert not issued().exists()


def test_au35_resource_with_upper_case_host_and_trailing_slash_binds_the_canonical_uri(
    client, public_client, dave, secure
):
    odd = canonical("vault").replace("http://127.0.0.1", "HTTP://127.0.0.1") + "/"
    code, verifier = _code_for(client, dave, public_client["client_id"], odd)
    response = exchange(client, public_client["client_id"], code, verifier, resource=odd)
    assert response.status_code == 200, response.content
    assert issued().get().resource == [canonical("vault")]


@pytest.mark.parametrize(
    "resource",
    [
        "https://elsewhere.example/t/vault/mcp",
        "http://127.0.0.1:8000/t/nope/mcp",
        "http://127.0.0.1:8000/t/vault/mcp#frag",
        "http://127.0.0.1:8000/admin/",
        "",
    ],
)
def test_au34_unknown_resource_at_authorize_is_invalid_target_with_state_and_iss(
    client, public_client, dave, secure, resource
):
    _, challenge = pkce_pair()
    client.force_login(dave)
    params = redirect_params(
        client.get(authorize_url(authorize_params(public_client["client_id"], challenge, resource=resource)))
    )
    assert params["error"] == "invalid_target"
    assert params["state"] == "st-123" and params["iss"] == resources.issuer()


def test_au34_public_mode_tenant_is_not_a_token_audience(client, public_client, dave, tenant_a):
    _, challenge = pkce_pair()
    client.force_login(dave)
    response = client.get(
        authorize_url(authorize_params(public_client["client_id"], challenge, resource=canonical("tenant-a")))
    )
    assert redirect_params(response)["error"] == "invalid_target"


def test_au34_two_resources_in_one_authorization_are_refused(
    client, public_client, dave, secure, other_secure
):
    _, challenge = pkce_pair()
    client.force_login(dave)
    url = authorize_url(authorize_params(public_client["client_id"], challenge, resource=canonical("vault")))
    url += "&resource=" + canonical("annex")
    assert redirect_params(client.get(url))["error"] == "invalid_target"


def test_au31_plain_pkce_is_refused(client, public_client, dave, secure):
    client.force_login(dave)
    params = authorize_params(
        public_client["client_id"], "a" * 43, resource=canonical("vault"), code_challenge_method="plain"
    )
    back = redirect_params(client.get(authorize_url(params)))
    assert back["error"] == "invalid_request" and back["state"] == "st-123"


def test_au31_challenge_without_a_method_counts_as_plain_and_is_refused(client, public_client, dave, secure):
    client.force_login(dave)
    params = authorize_params(public_client["client_id"], "a" * 43, resource=canonical("vault"))
    del params["code_challenge_method"]
    assert redirect_params(client.get(authorize_url(params)))["error"] == "invalid_request"


def test_au31_missing_pkce_is_refused(client, public_client, dave, secure):
    client.force_login(dave)
    params = authorize_params(public_client["client_id"], "x", resource=canonical("vault"))
    del params["code_challenge"], params["code_challenge_method"]
    back = redirect_params(client.get(authorize_url(params)))
    assert back["error"] == "invalid_request"
    assert "code challenge" in back["error_description"].lower()


def test_au31_malformed_or_oversized_code_challenge_is_refused(client, public_client, dave, secure):
    client.force_login(dave)
    for challenge in ("short", "a" * 129, "a" * 42 + "!"):
        params = authorize_params(public_client["client_id"], challenge, resource=canonical("vault"))
        assert redirect_params(client.get(authorize_url(params)))["error"] == "invalid_request"


def test_au31_wrong_code_verifier_gets_invalid_grant(client, public_client, dave, secure):
    code, _ = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    response = exchange(client, public_client["client_id"], code, pkce_pair()[0])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert not issued().exists()


def test_au31_token_request_without_code_verifier_is_refused(client, public_client, dave, secure):
    code, _ = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    response = client.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": LOOPBACK_REDIRECT,
            "client_id": public_client["client_id"],
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


def test_au32_unregistered_redirect_uri_gets_an_error_page_and_no_redirect(
    client, public_client, dave, secure
):
    _, challenge = pkce_pair()
    client.force_login(dave)
    params = authorize_params(
        public_client["client_id"],
        challenge,
        resource=canonical("vault"),
        redirect_uri="https://evil.example/cb",
    )
    response = client.get(authorize_url(params))
    assert response.status_code == 400
    assert "evil.example" not in response.get("Location", "")
    assert b"cannot be completed" in response.content


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://127.0.0.1:33418/callback/../../evil",
        "http://127.0.0.1:33418/callback?next=https://evil.example",
        "http://127.0.0.1@evil.example/callback",
        "http://127.0.0.1:33418/callback#https://evil.example",
        "http://127.0.0.2:33418/callback",
        "https://127.0.0.1:33418/callback",
    ],
)
def test_au32_open_redirect_attempts_are_never_redirected_to(client, public_client, redirect_uri, db):
    # Anonymous on purpose: the request is checked before anyone is asked to sign in.
    _, challenge = pkce_pair()
    response = client.get(
        authorize_url(authorize_params(public_client["client_id"], challenge, redirect_uri=redirect_uri))
    )
    assert response.status_code == 400
    assert "Location" not in response


def test_amb28_loopback_redirect_may_change_port_but_nothing_else(client, dave, secure, db):
    reg = registered_public_client(client, redirect_uris=["http://localhost:1/cb"])
    _, challenge = pkce_pair()
    client.force_login(dave)
    ok = client.get(
        authorize_url(
            authorize_params(
                reg["client_id"],
                challenge,
                resource=canonical("vault"),
                redirect_uri="http://localhost:49152/cb",
            )
        )
    )
    assert ok.status_code == 200
    wrong_path = client.get(
        authorize_url(
            authorize_params(
                reg["client_id"],
                challenge,
                resource=canonical("vault"),
                redirect_uri="http://localhost:49152/other",
            )
        )
    )
    assert wrong_path.status_code == 400


def test_au32_unknown_client_gets_an_error_page(client, dave, secure):
    _, challenge = pkce_pair()
    client.force_login(dave)
    response = client.get(
        authorize_url(authorize_params("no-such-client", challenge, resource=canonical("vault")))
    )
    assert response.status_code in (400, 401) and "Location" not in response


def test_au31_code_reuse_is_refused_and_revokes_the_tokens_the_code_bought(
    client, public_client, dave, secure
):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    first = exchange(client, public_client["client_id"], code, verifier)
    assert first.status_code == 200
    assert issued().count() == 1
    again = exchange(client, public_client["client_id"], code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert issued().count() == 0
    assert not RefreshToken.objects.filter(user=dave, revoked__isnull=True).exists()


def test_au31_a_third_try_of_a_replayed_code_is_still_invalid_grant(client, public_client, dave, secure):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    assert exchange(client, public_client["client_id"], code, verifier).status_code == 200
    for _ in range(2):
        again = exchange(client, public_client["client_id"], code, verifier)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_au31_another_clients_code_is_refused(client, public_client, dave, secure):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    thief = registered_public_client(client)
    response = exchange(client, thief["client_id"], code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert not issued().exists()


def test_au32_token_request_with_a_different_redirect_uri_is_refused(client, dave, secure, db):
    reg = registered_public_client(client, redirect_uris=[LOOPBACK_REDIRECT, "http://127.0.0.1:33418/other"])
    code, verifier = _code_for(client, dave, reg["client_id"], canonical("vault"))
    response = exchange(client, reg["client_id"], code, verifier, redirect_uri="http://127.0.0.1:33418/other")
    assert response.status_code == 400 and response.json()["error"] in ("invalid_grant", "invalid_request")


# --- Consent (AU-63 / AMB-24, SEC-01, SEC-04) --------------------------------------------------


def test_amb24_client_without_resource_chooses_one_of_the_users_oauth_tenants(
    client, public_client, dave, secure, other_secure, tenant_a
):
    Membership.objects.create(user=dave, tenant=tenant_a, role=Role.OWNER)  # public mode: never offered
    verifier, challenge = pkce_pair()
    client.force_login(dave)
    params = authorize_params(public_client["client_id"], challenge)
    page = client.get(authorize_url(params))
    assert page.status_code == 200
    assert [t.slug for t, _ in page.context["choices"]] == ["annex", "vault"]
    back = redirect_params(consent(client, params, tenant="vault"))
    token = exchange(client, public_client["client_id"], back["code"], verifier)
    assert token.status_code == 200, token.content
    assert issued().get().resource == [canonical("vault")]


def test_amb24_choice_offers_only_tenants_that_can_grant_the_requested_tool_scope(
    client, public_client, dave, secure, other_secure
):
    _, challenge = pkce_pair()
    client.force_login(dave)
    page = client.get(
        authorize_url(authorize_params(public_client["client_id"], challenge, scope="mcp:tools vault:open"))
    )
    assert [t.slug for t, _ in page.context["choices"]] == ["vault"]
    assert "Call the tool open_safe" not in page.content.decode()  # the tenant is not chosen yet


def test_amb24_a_forged_choice_of_a_tenant_the_user_is_not_in_grants_nothing(
    client, public_client, dave, secure, django_user_model
):
    outsider_tenant = Tenant.objects.create(slug="private", name="private", auth_mode="oauth")
    _, challenge = pkce_pair()
    client.force_login(dave)
    response = consent(
        client, authorize_params(public_client["client_id"], challenge), tenant=outsider_tenant.slug
    )
    assert response.status_code == 403
    assert not Grant.objects.exists()


def test_au_per_tool_scope_is_grantable_and_described_on_the_consent_page(
    client, public_client, dave, secure
):
    verifier, challenge = pkce_pair()
    client.force_login(dave)
    params = authorize_params(
        public_client["client_id"], challenge, resource=canonical("vault"), scope="mcp:tools vault:open"
    )
    assert "Call the tool open_safe" in client.get(authorize_url(params)).content.decode()
    back = redirect_params(consent(client, params))
    token = exchange(client, public_client["client_id"], back["code"], verifier).json()
    assert set(token["scope"].split()) == {"mcp:tools", "vault:open"}


def test_au_scope_no_tool_of_the_tenant_requires_is_invalid_scope(
    client, public_client, dave, secure, other_secure
):
    _, challenge = pkce_pair()
    client.force_login(dave)
    params = authorize_params(
        public_client["client_id"], challenge, resource=canonical("annex"), scope="mcp:tools vault:open"
    )
    back = redirect_params(client.get(authorize_url(params)))
    assert back["error"] == "invalid_scope" and back["state"] == "st-123"


def test_sec04_non_member_sees_a_clear_page_and_cannot_grant(client, public_client, eve, secure):
    _, challenge = pkce_pair()
    client.force_login(eve)
    params = authorize_params(public_client["client_id"], challenge, resource=canonical("vault"))
    page = client.get(authorize_url(params))
    assert page.status_code == 403
    assert b"Only members of this MCP server" in page.content
    forced = client.post(
        authorize_url(params),
        {
            "client_id": public_client["client_id"],
            "redirect_uri": LOOPBACK_REDIRECT,
            "response_type": "code",
            "scope": "mcp:tools",
            "state": "st-123",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": canonical("vault"),
            "allow": "on",
        },
    )
    assert forced.status_code == 403
    assert not Grant.objects.exists()


def test_sec04_user_without_any_oauth_tenant_is_told_so(client, public_client, eve, secure):
    _, challenge = pkce_pair()
    client.force_login(eve)
    page = client.get(authorize_url(authorize_params(public_client["client_id"], challenge)))
    assert page.status_code == 403 and b"not a member of any MCP server" in page.content


def test_au37_denial_returns_access_denied_with_state_and_iss(client, public_client, dave, secure):
    _, challenge = pkce_pair()
    client.force_login(dave)
    back = redirect_params(
        consent(
            client,
            authorize_params(public_client["client_id"], challenge, resource=canonical("vault")),
            allow=False,
        )
    )
    assert back == {"error": "access_denied", "state": "st-123", "iss": resources.issuer()} | (
        {"error_description": back["error_description"]} if "error_description" in back else {}
    )
    assert not Grant.objects.exists()


def test_sec01_dynamically_registered_client_always_gets_the_consent_page(
    client, public_client, dave, secure
):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    exchange(client, public_client["client_id"], code, verifier)
    _, challenge = pkce_pair()
    for extra in ({}, {"approval_prompt": "auto"}):
        params = authorize_params(public_client["client_id"], challenge, resource=canonical("vault"), **extra)
        assert client.get(authorize_url(params)).status_code == 200  # the page, not a redirect with a code


def test_sec01_prompt_none_cannot_skip_consent(client, public_client, dave, secure):
    _, challenge = pkce_pair()
    client.force_login(dave)
    params = authorize_params(
        public_client["client_id"], challenge, resource=canonical("vault"), prompt="none"
    )
    back = redirect_params(client.get(authorize_url(params)))
    assert back["error"] == "consent_required" and back["iss"] == resources.issuer()


def test_au32_private_use_redirect_receives_the_code(client, dave, secure, db):
    reg = registered_public_client(client, redirect_uris=["com.example.app:/oauth2redirect"])
    _, challenge = pkce_pair()
    client.force_login(dave)
    response = consent(
        client,
        authorize_params(
            reg["client_id"],
            challenge,
            resource=canonical("vault"),
            redirect_uri="com.example.app:/oauth2redirect",
        ),
    )
    assert response.status_code == 302 and response["Location"].startswith(
        "com.example.app:/oauth2redirect?code="
    )


def test_admin_revoking_a_client_deletes_its_tokens_and_stops_new_authorizations(
    client, public_client, dave, secure, admin_client
):
    code, verifier = _code_for(client, dave, public_client["client_id"], canonical("vault"))
    exchange(client, public_client["client_id"], code, verifier)
    application = Application.objects.get(client_id=public_client["client_id"])
    listing = admin_client.get("/admin/oauth2_provider/application/")
    assert listing.status_code == 200 and b"Test client" in listing.content
    assert admin_client.get(f"/admin/oauth2_provider/application/{application.pk}/change/").status_code == 200
    response = admin_client.post(
        "/admin/oauth2_provider/application/",
        {"action": "revoke_selected", "_selected_action": [application.pk]},
    )
    assert response.status_code == 302
    assert not issued().exists() and not RefreshToken.objects.exists()
    _, challenge = pkce_pair()
    again = client.get(
        authorize_url(authorize_params(public_client["client_id"], challenge, resource=canonical("vault")))
    )
    assert again.status_code == 400 and "Location" not in again


def test_admin_client_list_is_for_superusers_only(client, alice):
    client.force_login(alice)
    assert client.get("/admin/oauth2_provider/application/").status_code == 403
