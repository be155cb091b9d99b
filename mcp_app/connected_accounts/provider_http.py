"""What we say to a provider: its metadata, the code exchange, a refresh, a revocation (AMB-209).

Every request goes through the SSRF guard and a client pinned to the vetted address
(federation/transport.py), within FETCH_SECONDS. A provider's refusal is `ProviderRefused` with its
RFC 6749 §5.2 error code (never its description, which may quote anything); `invalid_grant` on a
refresh means the person's grant is gone, which the vault answers by deleting the connection.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx2
from django.conf import settings

from mcp_app.core import ssrf
from mcp_app.federation import transport

FETCH_SECONDS = 10.0
# Discovered endpoints are kept this long per process: a provider rarely moves them.
METADATA_SECONDS = 600.0
DEFAULT_LIFE_SECONDS = 3600
_ERROR_CODE = re.compile(r"[a-z_]{1,64}")


class ProviderRefused(Exception):
    """The provider said no, or could not be reached; ``message`` is ours and safe to show."""

    def __init__(self, message: str, error: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.error = error


@dataclass(frozen=True)
class Endpoints:
    authorize: str
    token: str
    revocation: str
    # From discovery: its issuer, and whether its authorization responses carry `iss` (RFC 9207).
    issuer: str = ""
    sends_iss: bool = False

    def iss_problem(self, iss: str | None) -> str:
        """Why an authorization response's `iss` shows it is not this provider's (RFC 9207 §2.4), or ""."""
        if iss is None:
            return "its answer did not say who sent it (iss)" if self.sends_iss else ""
        if self.issuer and iss != self.issuer:
            return "the answer came from another authorization server (iss)"
        return ""


@dataclass(frozen=True)
class Client:
    """What a request to one provider needs (decrypted for that request only)."""

    label: str
    client_id: str
    client_secret: str
    discovery_url: str
    authorize_url: str
    token_url: str
    revocation_url: str
    scopes: str
    resource: str


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str
    scope: str
    expires_at: float | None  # epoch seconds

    def sealed(self) -> dict[str, str]:
        """As stored (handlers/secrets takes string values only)."""
        return {
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "scope": self.scope,
            "expires_at": "" if self.expires_at is None else str(self.expires_at),
        }


_metadata: dict[str, tuple[float, Endpoints]] = {}


def _discovery_urls(url: str) -> list[str]:
    """The metadata URLs of an issuer (RFC 8414 §3 first, then OpenID discovery), or the URL as given."""
    if "/.well-known/" in url:
        return [url]
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


async def endpoints(client: Client) -> Endpoints:
    if not client.discovery_url:
        return Endpoints(client.authorize_url, client.token_url, client.revocation_url)
    held = _metadata.get(client.discovery_url)
    if held is not None and held[0] > time.monotonic():
        return held[1]
    for url in _discovery_urls(client.discovery_url):
        answer = await _send(client, "GET", url, headers={"Accept": "application/json"})
        if answer is None or answer[0] != 200:
            continue
        try:
            meta = json.loads(answer[1])
        except ValueError:
            continue
        if isinstance(meta, dict) and meta.get("authorization_endpoint") and meta.get("token_endpoint"):
            found = Endpoints(
                str(meta["authorization_endpoint"]),
                str(meta["token_endpoint"]),
                # An explicit revocation URL wins over the metadata's.
                client.revocation_url or str(meta.get("revocation_endpoint") or ""),
                issuer=str(meta.get("issuer") or ""),
                sends_iss=meta.get("authorization_response_iss_parameter_supported") is True,
            )
            _metadata[client.discovery_url] = (time.monotonic() + METADATA_SECONDS, found)
            return found
    raise ProviderRefused(f"{client.label}: its metadata (RFC 8414 or OpenID discovery) was not found.")


async def authorize_url(client: Client, *, redirect_uri: str, state: str, challenge: str) -> str:
    found = await endpoints(client)
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    if client.scopes:
        params["scope"] = client.scopes
    if client.resource:
        params["resource"] = client.resource
    return found.authorize + ("&" if "?" in found.authorize else "?") + urlencode(params)


async def exchange_code(client: Client, *, code: str, redirect_uri: str, verifier: str) -> Tokens:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    return await _token_request(client, form, previous_refresh="")


async def refresh(client: Client, refresh_token: str) -> Tokens:
    return await _token_request(
        client, {"grant_type": "refresh_token", "refresh_token": refresh_token}, refresh_token
    )


async def revoke(client: Client, token: str, hint: str) -> bool:
    """RFC 7009 where the provider offers it; whether the provider confirmed (200)."""
    found = await endpoints(client)
    if not found.revocation or not token:
        return False
    answer = await _send(
        client,
        "POST",
        found.revocation,
        data={"token": token, "token_type_hint": hint},
        headers=_auth(client, {}),
    )
    return answer is not None and answer[0] == 200


def _auth(client: Client, form: dict[str, str]) -> dict[str, str]:
    """Client authentication: Basic for a confidential client (RFC 6749 §2.3.1), client_id for a public one."""
    headers = {"Accept": "application/json"}
    if client.client_secret:
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form["client_id"] = client.client_id
    return headers


async def _token_request(client: Client, form: dict[str, str], previous_refresh: str) -> Tokens:
    found = await endpoints(client)
    if client.resource:
        form["resource"] = client.resource
    headers = _auth(client, form)
    answer = await _send(client, "POST", found.token, data=form, headers=headers)
    if answer is None:
        raise ProviderRefused(f"{client.label}: its token endpoint could not be reached.")
    status, body = answer
    try:
        reply = json.loads(body)
    except ValueError:
        reply = None
    if status != 200 or not isinstance(reply, dict) or not isinstance(reply.get("access_token"), str):
        error = _error_code(reply)
        said = f" ({error})" if error else ""
        raise ProviderRefused(f"{client.label}: its token endpoint refused: HTTP {status}{said}.", error)
    life = reply.get("expires_in")
    expires_at = time.time() + float(life) if isinstance(life, int | float) and life > 0 else None
    return Tokens(
        access_token=reply["access_token"],
        # RFC 6749 §6: a refresh reply may keep the refresh token it was given.
        refresh_token=str(reply.get("refresh_token") or previous_refresh),
        scope=str(reply.get("scope") or form.get("scope") or client.scopes),
        expires_at=expires_at,
    )


async def _send(client: Client, method: str, url: str, **options: Any) -> tuple[int, bytes] | None:
    """One request through the SSRF guard (None when it got no answer); a refused URL says why."""
    try:
        http = await transport.open_http_client(url, (), float(settings.MCP_UPSTREAM_CONNECT_SECONDS))
    except ssrf.SsrfRefused as exc:
        raise ProviderRefused(
            f"{client.label}: " + exc.message.replace("The tool's URL", "the provider's URL")
        ) from None
    try:
        async with asyncio.timeout(FETCH_SECONDS), http:
            response = await http.request(method, url, **options)
            return response.status_code, await response.aread()
    except (httpx2.HTTPError, TimeoutError):
        return None


def _error_code(reply: Any) -> str:
    error = reply.get("error") if isinstance(reply, dict) else None
    return error if isinstance(error, str) and _ERROR_CODE.fullmatch(error) else ""
