"""Our platform as an OpenID Connect provider for sign-in clients (AMB-214): identity only, no tenant."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views.mixins import OAuthLibMixin

from mcp_app.oauth import resources
from tenants.models import Invitation, Tenant
from tests.oauth.as_support import (
    LOOPBACK_REDIRECT,
    authorize_params,
    authorize_url,
    consent,
    exchange,
    pkce_pair,
    redirect_params,
)

pytestmark = pytest.mark.django_db

SECRET = "sign-in-client-secret-of-the-test"


@pytest.fixture
def provider(settings):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "OIDC_ENABLED": True,
        "OIDC_RSA_PRIVATE_KEY": pem,
        "OIDC_ISS_ENDPOINT": settings.MCP_PUBLIC_URL,
        "OAUTH2_SERVER_CLASS": "mcp_app.oauth.authorization_server.McpOpenIDServer",
    }
    forget_servers()
    yield key.public_key()
    oauth2_settings.reload()
    forget_servers()


def forget_servers() -> None:
    """DOT keeps one oauthlib server per view class, made with the settings of its first request."""
    pending = [OAuthLibMixin]
    while pending:
        view = pending.pop()
        pending.extend(view.__subclasses__())
        if "_oauthlib_core" in vars(view):
            delattr(view, "_oauthlib_core")


def application(algorithm: str = Application.RS256_ALGORITHM) -> Application:
    return Application.objects.create(
        name="Another deployment",
        client_id=f"sign-in-{algorithm or 'none'}",
        client_secret=SECRET,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=LOOPBACK_REDIRECT,
        algorithm=algorithm,
    )


@pytest.fixture
def dana(django_user_model):
    user = django_user_model.objects.create_user("dana", "dana@acme.test", "dana-pw-123")
    user.groups.add(Group.objects.create(name="ops-team"))
    return user


def signed_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_a_sign_in_client_gets_an_id_token_saying_who_with_no_mcp_access(provider, dana):
    app = application()
    tenant = Tenant.objects.create(slug="home", name="Home")
    Invitation.objects.create(
        tenant=tenant,
        email="dana@acme.test",
        expires_at=timezone.now(),
        accepted_at=timezone.now(),
        accepted_by=dana,
    )
    verifier, challenge = pkce_pair()
    params = authorize_params(app.client_id, challenge, scope="openid email", nonce="n-0S6")
    browser = signed_in(dana)
    page = browser.get(authorize_url(params))
    assert page.status_code == 200
    assert "Sign in to Another deployment with your account here?" in page.content.decode()
    code = redirect_params(consent(browser, params))["code"]
    issued = exchange(Client(), app.client_id, code, verifier, client_secret=SECRET)
    assert issued.status_code == 200, issued.content
    body = issued.json()
    claims = jwt.decode(body["id_token"], provider, algorithms=["RS256"], audience=app.client_id)
    assert claims["iss"] == resources.issuer() and claims["nonce"] == "n-0S6"
    assert (claims["email"], claims["email_verified"], claims["groups"]) == (
        "dana@acme.test",
        True,
        ["ops-team"],
    )
    token = AccessToken.objects.get(application=app)
    assert token.resource == [resources.issuer()]  # no MCP endpoint's, no API's


def test_an_address_no_invitation_proved_is_not_verified(provider, dana):
    app = application()
    verifier, challenge = pkce_pair()
    params = authorize_params(app.client_id, challenge, scope="openid email", nonce="n-1")
    code = redirect_params(consent(signed_in(dana), params))["code"]
    body = exchange(Client(), app.client_id, code, verifier, client_secret=SECRET).json()
    claims = jwt.decode(body["id_token"], provider, algorithms=["RS256"], audience=app.client_id)
    assert claims["email_verified"] is False


@pytest.mark.parametrize(
    ("algorithm", "scope", "resource"),
    [
        ("", "openid email", None),  # not a sign-in client
        (Application.RS256_ALGORITHM, "openid mcp:tools", None),  # identity mixed with MCP access
        (Application.RS256_ALGORITHM, "openid", "http://testserver/t/home/mcp"),  # naming an MCP server
    ],
)
def test_identity_scopes_come_alone_from_a_sign_in_client_for_no_server(
    provider, dana, algorithm, scope, resource
):
    Tenant.objects.create(slug="home", name="Home")
    app = application(algorithm)
    _, challenge = pkce_pair()
    params = authorize_params(app.client_id, challenge, scope=scope, resource=resource, nonce="n")
    answer = signed_in(dana).get(authorize_url(params))
    said = redirect_params(answer)
    assert said["error"] in {"invalid_scope", "invalid_target"}, said


def test_with_the_provider_off_openid_is_refused_and_no_key_is_published(dana):
    app = application()
    _, challenge = pkce_pair()
    params = authorize_params(app.client_id, challenge, scope="openid email", nonce="n")
    assert redirect_params(signed_in(dana).get(authorize_url(params)))["error"] == "invalid_scope"
    assert Client().get("/oauth/.well-known/jwks.json").status_code == 404
    assert "jwks_uri" not in Client().get("/.well-known/openid-configuration").json()


def test_discovery_lists_the_key_and_the_identity_scopes(provider):
    document = Client().get("/.well-known/openid-configuration").json()
    assert document["jwks_uri"].endswith("/oauth/.well-known/jwks.json")
    assert {"openid", "email"} <= set(document["scopes_supported"])
    keys = Client().get("/oauth/.well-known/jwks.json").json()["keys"]
    assert len(keys) == 1 and keys[0]["alg"] == "RS256" and "d" not in keys[0]
