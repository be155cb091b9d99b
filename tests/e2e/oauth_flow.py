"""Client-side OAuth tools for the end-to-end tests: a browser that signs in and consents, registration,
PKCE, tokens minted straight into the database, and an HTTPS server for client ID metadata documents.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import secrets
import ssl
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import trustme

from tests.e2e.helpers import REQUEST_SECONDS, form_fields
from tests.e2e.servers import used_secret

SECURE_SLUG = "secure"
SECURE_USER = "secure-user"
SECURE_PASSWORD = used_secret(f"secure-{secrets.token_urlsafe(12)}")
# A second oauth tenant of which secure-user is also a member: only the audience differs.
SECOND_SLUG = "secure-two"
# Another member of `secure` (session ownership) and a user who belongs to no tenant.
OTHER_USER = "other-member"
OUTSIDER = "outsider"
OTHER_PASSWORD = used_secret(f"other-{secrets.token_urlsafe(12)}")
OUTSIDER_PASSWORD = used_secret(f"outsider-{secrets.token_urlsafe(12)}")
# A loopback callback nobody listens on: the browser below stops at the redirect, as a native app would.
REDIRECT_URI = "http://127.0.0.1:33419/callback"
MINTING_CLIENT_ID = "e2e-minted-tokens"

SETUP_CODE = f"""
from django.contrib.auth import get_user_model
from oauth2_provider.models import Application
from tenants.models import Membership, Role, Tenant
User = get_user_model()
secure = Tenant.objects.get(slug={SECURE_SLUG!r})
second, _ = Tenant.objects.get_or_create(
    slug={SECOND_SLUG!r}, defaults=dict(name={SECOND_SLUG!r}, title="Second secure server", auth_mode="oauth"))
Membership.objects.get_or_create(user=User.objects.get(username={SECURE_USER!r}), tenant=second)
for name, password in (({OTHER_USER!r}, {OTHER_PASSWORD!r}), ({OUTSIDER!r}, {OUTSIDER_PASSWORD!r})):
    user, _ = User.objects.get_or_create(username=name)
    user.set_password(password)
    user.save()
Membership.objects.get_or_create(user=User.objects.get(username={OTHER_USER!r}), tenant=secure)
Application.objects.get_or_create(
    client_id={MINTING_CLIENT_ID!r},
    defaults=dict(name="minted", client_type="public", authorization_grant_type="authorization-code",
                  redirect_uris={REDIRECT_URI!r}, client_secret=""))
"""


def mint_code(tokens: list[dict[str, Any]]) -> str:
    """Python for `manage.py shell`: store access tokens as given (user, resource list, scope, expires_in)."""
    return f"""
import datetime
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
app = Application.objects.get(client_id={MINTING_CLIENT_ID!r})
for spec in {tokens!r}:
    AccessToken.objects.create(
        user=get_user_model().objects.get(username=spec["user"]), application=app, token=spec["token"],
        scope=spec["scope"], resource=spec["resource"],
        expires=timezone.now() + datetime.timedelta(seconds=spec["expires_in"]))
"""


def token_spec(user: str, resource: list[str], scope: str, expires_in: int = 3600) -> dict[str, Any]:
    return {
        "user": user,
        "resource": resource,
        "scope": scope,
        "expires_in": expires_in,
        "token": used_secret(secrets.token_urlsafe(32)),
    }


def pkce_pair() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636 §4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def fresh_loopback() -> str:
    """A loopback source address of its own, so registration rate limits of different tests never meet."""
    return f"127.{random.randint(1, 254)}.{random.randint(0, 254)}.{random.randint(1, 254)}"


@asynccontextmanager
async def http_from(base_url: str, source: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client whose connections come from `source` (a fresh loopback address by default)."""
    transport = httpx.AsyncHTTPTransport(local_address=source or fresh_loopback())
    async with httpx.AsyncClient(
        base_url=base_url, transport=transport, timeout=REQUEST_SECONDS, follow_redirects=False
    ) as http:
        yield http


async def register(base_url: str, source: str | None = None, **metadata: Any) -> httpx.Response:
    """POST RFC 7591 metadata (a public loopback client unless overridden) to the registration endpoint."""
    body = {
        "client_name": "E2E hostile-table client",
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        **metadata,
    }
    async with http_from(base_url, source) as http:
        return await http.post("/oauth/register", json=body)


def authorize_url(base_url: str, **params: str | None) -> str:
    return f"{base_url}/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


def query_of(location: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_NEXT = re.compile(r'name="next" value="([^"]*)"')


class OAuthBrowser:
    """A user at a web browser: follows the authorization server's pages, signs in, allows or denies.

    It stops at the redirect back to the client (the app's loopback callback), so the test can read
    `code`, `state` and `iss` from it.
    """

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url
        self.username = username
        self.password = password
        self.http = httpx.AsyncClient(base_url=base_url, timeout=REQUEST_SECONDS, follow_redirects=False)
        self.pages: list[str] = []  # every consent page shown, for assertions on what the user saw

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _login(self, login_url: str) -> str:
        page = await self.http.get(login_url)
        assert page.status_code == 200, f"login page: HTTP {page.status_code}: {page.text[:500]}"
        csrf = _CSRF.search(page.text)
        nxt = _NEXT.search(page.text)
        assert csrf and nxt, page.text[:2000]
        response = await self.http.post(
            urlsplit(login_url).path,
            data={
                "csrfmiddlewaretoken": csrf.group(1),
                "username": self.username,
                "password": self.password,
                "next": nxt.group(1).replace("&amp;", "&"),
            },
            headers={"Origin": self.base_url, "Referer": f"{self.base_url}{login_url}"},
        )
        assert response.status_code == 302, (
            f"sign-in refused (HTTP {response.status_code}): {response.text[:1000]}"
        )
        return response.headers["location"]

    async def sign_in(self) -> None:
        """Sign in on the authorization server's own page before any authorization request."""
        await self._login("/oauth/login?next=/oauth/login")

    async def open(self, url: str) -> httpx.Response:
        """GET an authorization URL; sign in when sent to the login page; return the page or the redirect."""
        response = await self.http.get(url)
        location = response.headers.get("location", "")
        if response.status_code == 302 and urlsplit(location).path == "/oauth/login":
            target = await self._login(location)
            response = await self.http.get(target)
        return response

    async def decide(
        self, url: str, *, allow: bool = True, tenant: str | None = None, extra: dict[str, str] | None = None
    ) -> httpx.Response:
        """Open the consent page for `url` and press Allow (or Deny); return the server's answer."""
        page = await self.open(url)
        if page.status_code != 200 or 'id="authorizationForm"' not in page.text:
            return page
        self.pages.append(page.text)
        fields = [
            (name, value) for name, value in form_fields(page.text, "authorizationForm") if name != "tenant"
        ]
        if tenant is not None:
            fields.append(("tenant", tenant))
        else:
            fields += [(n, v) for n, v in form_fields(page.text, "authorizationForm") if n == "tenant"]
        if allow:
            fields.append(("allow", "on"))
        fields += list((extra or {}).items())
        # The form has no action: a browser posts it to the page's own URL.
        return await self.http.post(
            url,
            content=urlencode(fields),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": self.base_url,
                "Referer": url,
            },
        )


def callback_params(response: httpx.Response, redirect_uri: str = REDIRECT_URI) -> dict[str, str]:
    """The parameters of a redirect back to the client's callback (fails on anything else)."""
    location = response.headers.get("location", "")
    assert response.status_code == 302 and location.split("?")[0] == redirect_uri, (
        f"expected a redirect to {redirect_uri}, got HTTP {response.status_code} to {location!r}: {response.text[:1000]}"
    )
    return query_of(location)


async def token_request(base_url: str, **data: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_SECONDS) as http:
        response = await http.post("/oauth/token", data=data)
    for name in ("code", "code_verifier", "client_secret", "refresh_token"):
        if data.get(name):
            used_secret(data[name])
    if response.headers.get("content-type", "").startswith("application/json"):
        issued = response.json()
        for name in ("access_token", "refresh_token"):
            if isinstance(issued.get(name), str):
                used_secret(issued[name])
    return response


# --- client ID metadata documents ------------------------------------------------------------------


class DocumentServer:
    """An HTTPS server on 127.0.0.1 answering fixed documents by path and recording what was asked."""

    def __init__(self, ca: trustme.CA) -> None:
        self.documents: dict[str, tuple[int, str, bytes]] = {}
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer.hits.append(self.path)
                status, content_type, body = outer.documents.get(self.path, (404, "text/plain", b"missing"))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the output clean
                return

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="e2e-cimd", daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def publish(self, path: str, document: dict[str, Any]) -> str:
        self.documents[path] = (200, "application/json", json.dumps(document).encode())
        return self.url(path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def client_document(client_id: str, **extra: Any) -> dict[str, Any]:
    """A public client's metadata document whose `client_id` is its own URL."""
    return {
        "client_id": client_id,
        "client_name": "E2E metadata-document client",
        "client_uri": "https://client.example",
        "logo_uri": "https://client.example/logo.png",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }
