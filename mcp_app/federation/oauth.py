"""An upstream's own OAuth client: tokens by the client credentials grant, on every request (AMB-198).

`ClientCredentials` (target.py) is what a tenant stored for an upstream: a client its authorization server issued
to the tenant, never a caller's token. `ClientCredentialsAuth` is the httpx2 auth of that upstream's
connections: each request carries the token held for those credentials, got once and shared by every
call until shortly before it expires; an upstream answering 401 has the token dropped and the request
sent once more with a new one (a 401 means it did not run), so a revoked or rotated token heals itself.

Without a token URL the endpoint is found as MCP clients find it: the upstream's protected resource
metadata (RFC 9728, at the well-known URLs the SDK builds) names its authorization server, whose
metadata (RFC 8414 or OpenID discovery) names the token endpoint and the client authentication it
takes. The token request names the resource (RFC 8707), as the MCP authorization spec requires. Every
one of these requests goes through the SSRF guard and a client pinned to its own vetted host, as the
upstream's own do (transport.py), within FETCH_SECONDS.

A refusal is `AuthRefused`, whose message is ours (the server's error code, never its description,
which may quote anything): the failure funnel (failures.py) makes it the call's UpstreamUnavailable.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
from django.conf import settings
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
)
from mcp.shared.auth import OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from mcp_app.core import ssrf
from mcp_app.federation import transport
from mcp_app.federation.target import ClientCredentials
from mcp_app.federation.transport import CURRENT_CALL

# One discovery and token request together may take this long (the call's own deadline still holds).
FETCH_SECONDS = 10.0
# A token is renewed this long before it expires (at most a tenth of its life), so none expires in flight.
EARLY_SECONDS = 60.0
# A token with no expires_in is kept this long.
DEFAULT_LIFE_SECONDS = 3600
MAX_HELD = 10_000
_ERROR_CODE = re.compile(r"[a-z_]{1,64}")


class AuthRefused(Exception):
    """No token could be had for an upstream; ``message`` is ours and safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Held:
    token: str
    renew_at: float


# Tokens held in this process, by (upstream URL, credentials digest); a lock per key and event loop,
# so concurrent calls wait for one token request instead of each making their own.
_held: dict[tuple[str, str], _Held] = {}
_locks: dict[tuple[int, tuple[str, str]], asyncio.Lock] = {}


def forget_all() -> None:
    """Drop every held token (tests; a process that rotated its upstreams' secrets)."""
    _held.clear()
    _locks.clear()


class ClientCredentialsAuth(httpx2.Auth):
    """The auth of one upstream's HTTP client: a bearer token got with ``credentials``."""

    def __init__(self, url: str, credentials: ClientCredentials, label: str) -> None:
        self.url = url
        self.credentials = credentials
        self.label = label
        self.key = (url, credentials.digest)

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self._sign(request)
        response = yield request
        if response.status_code != 401:
            return
        # The upstream no longer takes it (revoked, rotated, expired early): one new token, one more try.
        if (held := _held.get(self.key)) is not None and held.token == token:
            del _held[self.key]
        await self._sign(request)
        yield request

    async def _sign(self, request: httpx2.Request) -> str:
        """Put the held (or a new) token on ``request``; the token."""
        try:
            token = await self._token()
        except AuthRefused as exc:
            # The SDK may wrap what its request raised: the call's state keeps our words.
            if (state := CURRENT_CALL.get()) is not None:
                state.auth_error = exc
            raise
        request.headers["Authorization"] = f"Bearer {token}"
        return token

    async def _token(self) -> str:
        held = _held.get(self.key)
        if held is not None and time.monotonic() < held.renew_at:
            return held.token
        lock_key = (id(asyncio.get_running_loop()), self.key)
        lock = _locks.setdefault(lock_key, asyncio.Lock())
        async with lock:
            held = _held.get(self.key)
            if held is not None and time.monotonic() < held.renew_at:
                return held.token
            # The token's requests are not the call's: its view of the wire (statuses) stays the upstream's.
            outer = CURRENT_CALL.set(None)
            try:
                async with asyncio.timeout(FETCH_SECONDS):
                    token, life = await self._fetch()
            except TimeoutError:
                raise self._refused(
                    f"its authorization server did not answer within {FETCH_SECONDS:g} s"
                ) from None
            finally:
                CURRENT_CALL.reset(outer)
            if len(_held) >= MAX_HELD:
                _held.clear()
            _held[self.key] = _Held(token, time.monotonic() + life - min(EARLY_SECONDS, life / 10))
            return token

    def _refused(self, why: str) -> AuthRefused:
        return AuthRefused(f"Upstream {self.label}: no OAuth token: {why}.")

    async def _fetch(self) -> tuple[str, float]:
        endpoint, methods, resource = await self._endpoint()
        form = {"grant_type": "client_credentials", "resource": resource}
        if self.credentials.scope:
            form["scope"] = self.credentials.scope
        headers = {"Accept": "application/json"}
        if "client_secret_basic" in methods or "client_secret_post" not in methods:
            # RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
            pair = f"{quote(self.credentials.client_id, safe='')}:{quote(self.credentials.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form |= {"client_id": self.credentials.client_id, "client_secret": self.credentials.client_secret}
        response = await self._send("POST", endpoint, data=form, headers=headers)
        if response is None:
            raise self._refused("its token endpoint could not be reached")
        status, body = response
        if status != 200:
            error = _error_code(body)
            said = f" ({error})" if error else ""
            raise self._refused(
                f"its authorization server refused our client credentials: HTTP {status}{said}"
            )
        try:
            token = OAuthToken.model_validate_json(body)
        except ValidationError:
            raise self._refused("its authorization server's token reply is not a bearer token") from None
        life = float(token.expires_in) if token.expires_in and token.expires_in > 0 else DEFAULT_LIFE_SECONDS
        return token.access_token, life

    async def _endpoint(self) -> tuple[str, list[str], str]:
        """The token endpoint, the client authentication methods it takes, and the resource to name."""
        if self.credentials.token_url:
            return self.credentials.token_url, [], self.url
        found = await self._first(
            build_protected_resource_metadata_discovery_urls(None, self.url), ProtectedResourceMetadata
        )
        if found is None:
            raise self._refused("its protected resource metadata (RFC 9728) was not found; set the token URL")
        resource = str(found.resource)
        issuer = str(found.authorization_servers[0])
        meta = await self._first(
            build_oauth_authorization_server_metadata_discovery_urls(issuer, self.url), OAuthMetadata
        )
        if meta is None:
            raise self._refused(
                "its authorization server's metadata (RFC 8414) was not found; set the token URL"
            )
        if meta.grant_types_supported is not None and "client_credentials" not in meta.grant_types_supported:
            raise self._refused("its authorization server does not offer the client credentials grant")
        return str(meta.token_endpoint), list(meta.token_endpoint_auth_methods_supported or []), resource

    async def _first(self, urls: list[str], model: Any) -> Any:
        for url in urls:
            response = await self._send("GET", url, headers={"Accept": "application/json"})
            if response is not None and response[0] == 200:
                try:
                    return model.model_validate_json(response[1])
                except ValidationError:
                    continue
        return None

    async def _send(self, method: str, url: str, **options: Any) -> tuple[int, bytes] | None:
        """One request through the SSRF guard (None when it got no answer); refused URLs say why."""
        try:
            client = await transport.open_http_client(url, (), float(settings.MCP_UPSTREAM_CONNECT_SECONDS))
        except ssrf.SsrfRefused as exc:
            raise self._refused(
                exc.message.replace("The tool's URL", "its authorization server's URL")
            ) from None
        try:
            async with client:
                response = await client.request(method, url, **options)
                return response.status_code, await response.aread()
        except httpx2.HTTPError:
            return None


def _error_code(body: bytes) -> str:
    """The RFC 6749 §5.2 error code of a refusal, if it is one (its description is never shown)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return error if isinstance(error, str) and _ERROR_CODE.fullmatch(error) else ""
