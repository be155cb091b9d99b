"""Single sign-on's checks (AMB-212, AMB-214), through the real callback and the real HTTP exchanges.

The identity provider here is a hostile one of the test's own, a real HTTP server on 127.0.0.1 that
publishes a discovery document and a JWKS and answers the token request with whatever id_token the test
chose: forged, unsigned, for another audience or issuer, with another nonce or an unverified address.
Each must end on a page saying why, signed out, never a 500; a good one signs in and goes to `next`.
The whole flow against our own platform as the provider, in Chromium: tests/e2e/test_browser_sso.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import Client

from mcpsite import sso
from tenants.models import GrantedBy, Membership, Role, Tenant

pytestmark = pytest.mark.django_db

CLIENT_ID = "our-platform"
CLIENT_SECRET = "a-client-secret-of-the-test-32-bytes-long"
KID = "key-1"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


PROVIDER_KEY, OTHER_KEY = _key(), _key()


class Issuer(ThreadingHTTPServer):
    daemon_threads = True
    id_token: str = ""
    token_status: int = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Issuer

    def _json(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        base = self.server.url
        if self.path == "/.well-known/openid-configuration":
            self._json(
                {
                    "issuer": base,
                    "authorization_endpoint": f"{base}/authorize",
                    "token_endpoint": f"{base}/token",
                    "jwks_uri": f"{base}/jwks",
                }
            )
        elif self.path == "/jwks":
            public = jwt.algorithms.RSAAlgorithm.to_jwk(PROVIDER_KEY.public_key(), as_dict=True)
            self._json({"keys": [{**public, "kid": KID, "alg": "RS256", "use": "sig"}]})
        else:
            self._json({"error": "not_found"}, 404)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.token_status != 200:
            self._json({"error": "invalid_grant"}, self.server.token_status)
        else:
            self._json({"access_token": "at", "token_type": "Bearer", "id_token": self.server.id_token})

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@pytest.fixture
def issuer(settings) -> Iterator[Issuer]:
    server = Issuer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.MCP_OIDC_ENABLED = True
    settings.MCP_OIDC_ISSUER = server.url
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.MCP_OIDC_PROVIDER_NAME = "Acme ID"
    settings.MCP_OIDC_ALLOWED_DOMAINS = []
    sso._discovery.clear()
    yield server
    sso._discovery.clear()
    server.shutdown()
    server.server_close()


def claims(issuer: Issuer, nonce: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": issuer.url,
        "aud": CLIENT_ID,
        "sub": "42",
        "iat": now,
        "exp": now + 300,
        "nonce": nonce,
        "email": "dana@acme.test",
        "email_verified": True,
        "groups": [],
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def pem_of(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


PROVIDER_PEM = pem_of(PROVIDER_KEY)


def signed(payload: dict[str, Any], key: rsa.RSAPrivateKey = PROVIDER_KEY) -> str:
    return jwt.encode(payload, pem_of(key), algorithm="RS256", headers={"kid": KID})


def start(client: Client, next_url: str = "/admin/") -> tuple[str, str]:
    """Press "Sign in with …": (state, nonce) the provider was sent."""
    response = client.get("/sso/start", {"next": next_url})
    assert response.status_code == 302, response.content
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["scope"] == ["openid email"]
    return query["state"][0], query["nonce"][0]


def come_back(client: Client, state: str) -> Any:
    return client.get("/sso/callback", {"code": "the-code", "state": state})


def signed_in(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id).get_username() if user_id else None


@pytest.fixture
def acme(db) -> Tenant:
    return Tenant.objects.create(
        slug="acme", name="Acme", sso_email_domains=["acme.test"], sso_role=Role.EDITOR
    )


def test_a_good_sign_in_creates_the_account_maps_the_tenant_and_goes_to_next(issuer, acme):
    client = Client()
    state, nonce = start(client, "/oauth/authorize?client_id=x")
    issuer.id_token = signed(claims(issuer, nonce))
    response = come_back(client, state)
    assert response.status_code == 302 and response["Location"] == "/oauth/authorize?client_id=x"
    assert signed_in(client) == "dana"
    user = get_user_model().objects.get(username="dana")
    assert user.email == "dana@acme.test" and not user.has_usable_password()
    membership = Membership.objects.get(user=user)
    assert (membership.tenant, membership.role, membership.granted_by) == (acme, Role.EDITOR, GrantedBy.SSO)


def test_a_new_account_never_takes_an_existing_username(issuer, acme, django_user_model):
    django_user_model.objects.create_user("dana", "someone-else@other.test")
    django_user_model.objects.create_user("dana-2", "another@other.test")
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    come_back(client, state)
    assert signed_in(client) == "dana-3"


def test_a_verified_address_links_the_existing_account(issuer, django_user_model):
    local = django_user_model.objects.create_user("d.local", "Dana@Acme.test", "pw-of-dana-123")
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    assert come_back(client, state).status_code == 302
    assert signed_in(client) == local.username


REFUSALS = {
    "forged signature": (lambda i, n: signed(claims(i, n), OTHER_KEY), 400, "could not be verified"),
    "unsigned (alg none)": (
        lambda i, n: jwt.encode(claims(i, n), None, algorithm="none", headers={"kid": KID}),
        400,
        "could not be verified",
    ),
    "HS256 with our own client secret": (
        lambda i, n: jwt.encode(claims(i, n), CLIENT_SECRET, algorithm="HS256", headers={"kid": KID}),
        400,
        "could not be verified",
    ),
    "another audience": (lambda i, n: signed(claims(i, n, aud="another-app")), 400, "another application"),
    "another issuer": (lambda i, n: signed(claims(i, n, iss="https://evil.test")), 400, "another issuer"),
    "another nonce": (lambda i, n: signed(claims(i, "not-" + n)), 400, "could not be verified"),
    "expired": (lambda i, n: signed(claims(i, n, exp=int(time.time()) - 60)), 400, "could not be verified"),
    "unverified address": (lambda i, n: signed(claims(i, n, email_verified=False)), 403, "is not verified"),
    "no address": (lambda i, n: signed(claims(i, n, email=None)), 403, "gave no e-mail address"),
    "no id_token": (lambda i, n: "", 400, "sent no identity token"),
    "a token without a key id": (
        lambda i, n: jwt.encode(claims(i, n), PROVIDER_PEM, algorithm="RS256"),
        502,
        "could not be read",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_hostile_or_doubtful_id_token_is_refused_with_a_page(issuer, acme, case):
    make, status, words = REFUSALS[case]
    client = Client()
    state, nonce = start(client)
    issuer.id_token = make(issuer, nonce)
    response = come_back(client, state)
    assert response.status_code == status, response.content[:400]
    assert words in response.content.decode()
    assert signed_in(client) is None
    assert not Membership.objects.exists()


def test_a_replayed_state_is_refused_with_a_page(issuer, acme):
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    assert come_back(client, state).status_code == 302
    client.logout()
    state_2, _ = start(client)  # a sign-in under way, whose state is another
    response = come_back(client, state)
    assert response.status_code == 400 and "already used or is not yours" in response.content.decode()
    assert signed_in(client) is None
    # A browser that started nothing (no state in its session) gets the page too.
    response = come_back(Client(), state_2)
    assert response.status_code == 400 and "did not finish" in response.content.decode()


def test_an_address_of_another_domain_gets_no_tenant_and_may_be_kept_out(issuer, acme, settings):
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce, email="mallory@evil.test"))
    come_back(client, state)
    assert signed_in(client) == "mallory" and not Membership.objects.exists()
    settings.MCP_OIDC_ALLOWED_DOMAINS = ["acme.test"]
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce, email="eve@evil.test"))
    response = come_back(client, state)
    assert response.status_code == 403 and "evil.test may not sign in here" in response.content.decode()
    assert signed_in(client) is None


def test_an_existing_account_is_never_linked_on_an_address_the_provider_did_not_verify(
    issuer, django_user_model
):
    django_user_model.objects.create_user("dana", "dana@acme.test", "pw-of-dana-123")
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce, email_verified=None))  # the claim left out
    response = come_back(client, state)
    assert response.status_code == 403 and "did not verify that address" in response.content.decode()
    assert signed_in(client) is None


def test_a_session_of_an_account_disabled_since_ends(issuer):
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    come_back(client, state)
    assert client.get("/api-tokens").status_code == 200
    get_user_model().objects.filter(username="dana").update(is_active=False)
    assert client.get("/api-tokens").status_code == 302  # to the sign-in page


def test_an_inactive_account_stays_refused(issuer, django_user_model):
    django_user_model.objects.create_user("dana", "dana@acme.test", is_active=False)
    client = Client()
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    response = come_back(client, state)
    assert response.status_code == 403 and "disabled" in response.content.decode()
    assert signed_in(client) is None


def test_the_provider_refusing_the_code_or_unreachable_is_a_page(issuer, settings):
    client = Client()
    state, _ = start(client)
    issuer.token_status = 400
    response = come_back(client, state)
    assert response.status_code == 400 and "refused to finish" in response.content.decode()
    response = client.get("/sso/callback", {"error": "access_denied", "state": state})
    assert response.status_code == 400 and "access_denied" in response.content.decode()
    sso._discovery.clear()
    settings.MCP_OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens there
    response = client.get("/sso/start", {"next": "/admin/"})
    assert response.status_code == 502 and "could not be reached" in response.content.decode()


def test_the_sign_in_pages_offer_the_provider_and_keep_the_password_form(issuer, django_user_model):
    django_user_model.objects.create_user("pat", "pat@local.test", "pw-of-pat-123", is_staff=True)
    for path in ("/admin/login/?next=/admin/", "/oauth/login?next=/oauth/authorize%3Fclient_id%3Dx"):
        page = Client().get(path).content.decode()
        assert "Sign in with Acme ID" in page and 'name="password"' in page, path
    assert (
        "/sso/start?next=/oauth/authorize%3Fclient_id%3Dx"
        in Client().get("/oauth/login?next=/oauth/authorize%3Fclient_id%3Dx").content.decode()
    )
    client = Client()
    response = client.post("/oauth/login", {"username": "pat", "password": "pw-of-pat-123", "next": "/"})
    assert response.status_code == 302 and signed_in(client) == "pat"


def test_without_its_settings_single_sign_on_is_not_there(settings):
    settings.MCP_OIDC_ENABLED = False
    assert Client().get("/sso/start").status_code == 404
    assert Client().get("/sso/callback", {"code": "c", "state": "s"}).status_code == 404
    assert "Sign in with" not in Client().get("/admin/login/").content.decode()


@pytest.mark.parametrize("url", ["/oauth/login", "/admin/login/"])
def test_password_sign_in_beside_sso_is_still_throttled_and_sso_still_works_from_there(
    issuer, settings, django_user_model, url
):
    django_user_model.objects.create_user("pat", "pat@local.test", "pw-of-pat-123", is_staff=True)
    settings.AXES_FAILURE_LIMIT = 2
    client = Client()
    for _ in range(2):
        answer = client.post(url, {"username": "pat", "password": "wrong"}, REMOTE_ADDR="203.0.113.7")
    assert answer.status_code == 429 and "Too many sign-in attempts" in answer.content.decode()
    right = client.post(url, {"username": "pat", "password": "pw-of-pat-123"}, REMOTE_ADDR="203.0.113.7")
    assert right.status_code == 429
    # The lock is on the password of that username from that address; the provider's sign-in is another door.
    state, nonce = start(client)
    issuer.id_token = signed(claims(issuer, nonce))
    back = client.get("/sso/callback", {"code": "c", "state": state}, REMOTE_ADDR="203.0.113.7")
    assert back.status_code == 302 and signed_in(client) == "dana"
