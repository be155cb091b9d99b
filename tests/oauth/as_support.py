"""Helpers for the authorization-server tests: PKCE pairs, registration, the browser's consent step."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from django.test import Client

from mcp_app.oauth import resources

LOOPBACK_REDIRECT = "http://127.0.0.1:33418/callback"


def pkce_pair() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636 §4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def register(client: Client, **metadata: Any) -> Any:
    """POST RFC 7591 metadata to the registration endpoint; returns the response."""
    body = {"redirect_uris": [LOOPBACK_REDIRECT], "token_endpoint_auth_method": "none", **metadata}
    return client.post("/oauth/register", data=json.dumps(body), content_type="application/json")


def registered_public_client(client: Client, **metadata: Any) -> dict[str, Any]:
    response = register(client, client_name="Test client", **metadata)
    assert response.status_code == 201, response.content
    return response.json()


def authorize_params(
    client_id: str,
    challenge: str,
    *,
    resource: str | None = None,
    redirect_uri: str = LOOPBACK_REDIRECT,
    state: str = "st-123",
    scope: str | None = None,
    **extra: str,
) -> dict[str, str]:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    if resource is not None:
        params["resource"] = resource
    if scope is not None:
        params["scope"] = scope
    params.update(extra)
    return params


def authorize_url(params: dict[str, str]) -> str:
    return "/oauth/authorize?" + urlencode(params)


def redirect_params(response: Any) -> dict[str, str]:
    """The query parameters of a redirect back to the client."""
    assert response.status_code == 302, (response.status_code, response.content[:500])
    return {k: v[0] for k, v in parse_qs(urlsplit(response["Location"]).query).items()}


def consent(browser: Client, params: dict[str, str], *, allow: bool = True, tenant: str | None = None) -> Any:
    """GET the consent page, then submit its form as a browser would (hidden fields as rendered)."""
    page = browser.get(authorize_url(params))
    assert page.status_code == 200, page.content[:2000]
    form = page.context["form"]
    data = {
        name: field.value() or "" for name, field in ((n, form[n]) for n in form.fields) if field.is_hidden
    }
    if tenant is not None:
        data["tenant"] = tenant
    if allow:
        data["allow"] = "on"
    return browser.post(authorize_url(params), data)


def exchange(client: Client, client_id: str, code: str, verifier: str, **extra: str) -> Any:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": LOOPBACK_REDIRECT,
        "client_id": client_id,
        "code_verifier": verifier,
        **extra,
    }
    return client.post("/oauth/token", data)


def canonical(slug: str) -> str:
    return resources.canonical_uri(slug)
