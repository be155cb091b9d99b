"""The official MCP SDK client's OAuth support against a real Daphne: discovery, registration (dynamic and
by client ID metadata document), the browser step, tokens, MCP calls, refresh, revocation.

The "browser" is httpx driving the authorization server's own pages: it signs in as `secure-user`
(CSRF token from the page), presses Allow on the consent form, and hands the redirect's `code`,
`state` and `iss` to the SDK's callback handler, as a native app's loopback listener would.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, POLL_SECONDS, REQUEST_SECONDS
from tests.e2e.oauth_flow import (
    REDIRECT_URI,
    SECURE_PASSWORD,
    SECURE_SLUG,
    SECURE_USER,
    DocumentServer,
    OAuthBrowser,
    callback_params,
    client_document,
    query_of,
)
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory (what a client keeps between runs)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class BrowserStep:
    """The SDK's redirect and callback handlers: a user who signs in and allows, through `OAuthBrowser`."""

    browser: OAuthBrowser
    authorize_urls: list[str] = field(default_factory=list)
    _result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, url: str) -> None:
        self.authorize_urls.append(url)
        params = callback_params(await self.browser.decide(url))
        self._result = AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        assert result is not None, "the SDK asked for the callback before opening the browser"
        return result


@dataclass
class Wire:
    """Every HTTP exchange the SDK made, the OAuth flow's own requests included: (method, path, status)."""

    log: list[tuple[str, str, int]] = field(default_factory=list)

    async def on_response(self, response: httpx2.Response) -> None:
        url = urlsplit(str(response.request.url))
        self.log.append((response.request.method, url.path, response.status_code))

    def since(self, mark: int) -> list[tuple[str, str, int]]:
        return self.log[mark:]


@asynccontextmanager
async def sdk_client(url: str, provider: OAuthClientProvider, wire: Wire) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        auth=provider,
        timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0),
        event_hooks={"response": [wire.on_response]},
    )
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http), read_timeout_seconds=REQUEST_SECONDS, cache=None
        )
        async with client:
            yield client


def client_metadata(name: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=name,
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


def stored_token(server: DaphneServer, client_id: str) -> dict[str, Any]:
    """The newest access token of a client as the database holds it (read from another process)."""
    out = django_shell(
        server.env,
        "import json\nfrom oauth2_provider.models import AccessToken\n"
        f"t = AccessToken.objects.filter(application__client_id={client_id!r}).order_by('-id').first()\n"
        "print(json.dumps({'resource': t.resource, 'scope': t.scope, 'user': t.user.username}))\n",
    )
    return json.loads(out.strip().splitlines()[-1])


async def raw_status(server: DaphneServer, token: str) -> httpx.Response:
    """POST initialize with a bearer token, outside the SDK."""
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        return await http.post(
            server.mcp_url(SECURE_SLUG),
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
        )


def prm_url(server: DaphneServer) -> str:
    return f"/.well-known/oauth-protected-resource/t/{SECURE_SLUG}/mcp"


async def test_au_sdk_client_registers_dynamically_authorizes_through_the_browser_calls_refreshes_and_is_revoked(
    oauth_server: DaphneServer,
) -> None:
    """AU-01..AU-47 end to end with dynamic registration (RFC 7591), then refresh and revocation (RFC 7009)."""
    server = oauth_server
    storage, wire = MemoryStorage(), Wire()
    browser = OAuthBrowser(server.url, SECURE_USER, SECURE_PASSWORD)
    step = BrowserStep(browser)
    provider = OAuthClientProvider(
        server_url=server.mcp_url(SECURE_SLUG),
        client_metadata=client_metadata("E2E SDK client (dynamic registration)"),
        storage=storage,
        redirect_handler=step.redirect_handler,
        callback_handler=step.callback_handler,
    )
    canonical = server.mcp_url(SECURE_SLUG)
    try:
        async with sdk_client(server.mcp_url(SECURE_SLUG), provider, wire) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"say_hello", "read_vault"} <= tools  # tools/list shows tools the token cannot call
            hello = await client.call_tool("say_hello", {"name": "Ada"})
            assert not hello.is_error
            assert texts(hello) == ["Hello from the secure server, Ada!"]

            # Discovery: 401 -> protected resource metadata -> AS metadata -> registration -> token.
            flow = [(method, path, status) for method, path, status in wire.log]
            first_401 = next(i for i, entry in enumerate(flow) if entry[2] == 401)
            assert flow[first_401][1] == f"/t/{SECURE_SLUG}/mcp"
            oauth_steps = [entry for entry in flow[first_401 + 1 :] if not entry[1].startswith("/t/")]
            assert oauth_steps == [
                ("GET", prm_url(server), 200),
                ("GET", "/.well-known/oauth-authorization-server", 200),
                ("POST", "/oauth/register", 201),
                ("POST", "/oauth/token", 200),
            ]
            assert len(step.authorize_urls) == 1
            sent = query_of(step.authorize_urls[0])
            client_id = storage.client_info.client_id
            assert sent["client_id"] == client_id
            assert sent["code_challenge_method"] == "S256" and sent["resource"] == canonical
            assert "registered itself (dynamic client registration)" in browser.pages[0]
            assert "E2E SDK client (dynamic registration)" in browser.pages[0]
            assert stored_token(server, client_id) == {
                "resource": [canonical],
                "scope": "mcp:tools mcp:prompts mcp:resources",
                "user": SECURE_USER,
            }

            # Refresh: the access token expires (in the database, written by another process, and on the
            # client's clock, as `expires_in` would tell it); the SDK refreshes without the browser.
            first_access = storage.tokens.access_token
            first_refresh = storage.tokens.refresh_token
            django_shell(
                server.env,
                "import datetime\nfrom django.utils import timezone\nfrom oauth2_provider.models import AccessToken\n"
                f"AccessToken.objects.filter(application__client_id={client_id!r})"
                ".update(expires=timezone.now() - datetime.timedelta(seconds=1))\n",
            )
            expired = await wait_until_status(server, first_access, 401)
            assert 'error="invalid_token"' in expired.headers["www-authenticate"]
            assert "expired" in expired.headers["www-authenticate"]
            provider.context.token_expiry_time = time.time() - 1
            mark = len(wire.log)
            again = await client.call_tool("say_hello", {"name": "Grace"})
            assert texts(again) == ["Hello from the secure server, Grace!"]
            assert [e for e in wire.since(mark) if e[1] == "/oauth/token"] == [("POST", "/oauth/token", 200)]
            assert not [e for e in wire.since(mark) if e[2] == 401]
            assert len(step.authorize_urls) == 1  # no second trip through the browser
            assert storage.tokens.access_token != first_access
            assert storage.tokens.refresh_token != first_refresh  # rotated
            assert (await raw_status(server, storage.tokens.access_token)).status_code == 200

            # Revocation (RFC 7009): the next MCP call gets 401, and the SDK goes back through the browser.
            revoked = storage.tokens.access_token
            async with httpx.AsyncClient(base_url=server.url, timeout=REQUEST_SECONDS) as http:
                response = await http.post(
                    "/oauth/revoke",
                    data={"token": revoked, "token_type_hint": "access_token", "client_id": client_id},
                )
            assert response.status_code == 200
            refused = await wait_until_status(server, revoked, 401)
            assert refused.headers["www-authenticate"] == (
                'Bearer error="invalid_token",'
                'error_description="The access token is unknown, revoked or malformed.",'
                'scope="mcp:tools mcp:prompts mcp:resources",'
                f'resource_metadata="{server.url}{prm_url(server)}"'
            )
            mark = len(wire.log)
            third = await client.call_tool("say_hello", {"name": "Linus"})
            assert texts(third) == ["Hello from the secure server, Linus!"]
            after = wire.since(mark)
            assert after[0] == ("POST", f"/t/{SECURE_SLUG}/mcp", 401)
            assert ("POST", "/oauth/register", 201) not in after  # the registration is kept
            assert len(step.authorize_urls) == 2
            assert storage.tokens.access_token != revoked
    finally:
        await browser.aclose()


async def wait_until_status(
    server: DaphneServer, token: str, status: int, timeout: float = 10.0
) -> httpx.Response:
    """Poll until the endpoint answers `status` to this token (the server caches token checks for 1 s)."""
    response = await raw_status(server, token)
    with anyio.move_on_after(timeout):
        while response.status_code != status:
            await anyio.sleep(POLL_SECONDS)
            response = await raw_status(server, token)
    assert response.status_code == status, (
        f"still HTTP {response.status_code} after {timeout:.0f} s: {response.text}"
    )
    return response


async def test_au25_sdk_client_uses_a_client_id_metadata_document_served_over_https_on_loopback(
    oauth_server: DaphneServer, cimd_documents: DocumentServer
) -> None:
    """AU-25 (2025-11-25 client ID metadata documents): no registration request; the server fetches the URL."""
    server = oauth_server
    client_id = cimd_documents.url("/clients/e2e-sdk.json")
    cimd_documents.publish("/clients/e2e-sdk.json", client_document(client_id))
    storage, wire = MemoryStorage(), Wire()
    browser = OAuthBrowser(server.url, SECURE_USER, SECURE_PASSWORD)
    step = BrowserStep(browser)
    provider = OAuthClientProvider(
        server_url=server.mcp_url(SECURE_SLUG),
        client_metadata=client_metadata("E2E metadata-document client"),
        storage=storage,
        redirect_handler=step.redirect_handler,
        callback_handler=step.callback_handler,
        client_metadata_url=client_id,
    )
    try:
        async with sdk_client(server.mcp_url(SECURE_SLUG), provider, wire) as client:
            result = await client.call_tool("say_hello", {"name": "Ada"})
            assert texts(result) == ["Hello from the secure server, Ada!"]
    finally:
        await browser.aclose()
    assert not [entry for entry in wire.log if entry[1] == "/oauth/register"]
    assert query_of(step.authorize_urls[0])["client_id"] == client_id
    assert "/clients/e2e-sdk.json" in cimd_documents.hits
    page = browser.pages[0]
    assert "E2E metadata-document client" in page
    assert "metadata document at 127.0.0.1" in page
    assert "https://client.example/logo.png" in page
    assert stored_token(server, client_id)["resource"] == [server.mcp_url(SECURE_SLUG)]
