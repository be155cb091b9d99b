"""Connecting a client to an OAuth tenant as a person does it: in a real browser (Chromium, through Playwright).

The official MCP SDK client registers itself, opens the authorization URL in the browser; the person signs
in and presses Allow; the SDK's loopback listener catches the redirect, exchanges the code with PKCE and
calls the MCP endpoint. Before issue 8 every form post here failed with Django's "CSRF verification
failed" page, because the pages told the browser to send `Origin: null`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import Browser, BrowserContext, Page

from tests.e2e.browser import (
    PAGE_MS,
    Callback,
    Screenshots,
    chromium,
    forbidden_by_csrf,
    loopback_callback,
    sign_in,
)
from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.oauth_flow import (
    OUTSIDER,
    OUTSIDER_PASSWORD,
    SECURE_PASSWORD,
    SECURE_SLUG,
    SECURE_USER,
    authorize_url,
    pkce_pair,
    register,
    token_request,
)
from tests.e2e.servers import DaphneServer, django_shell
from tests.e2e.test_oauth_client import MemoryStorage

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


@pytest.fixture
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    """A fresh browser profile: no cookies, as for a person who never signed in here."""
    ctx = await browser.new_context()
    ctx.set_default_timeout(PAGE_MS)
    yield ctx
    await ctx.close()


@pytest.fixture
async def callback() -> AsyncIterator[Callback]:
    async with loopback_callback() as listener:
        yield listener


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(request.node.name)


async def text_of(page: Page) -> str:
    return await page.inner_text("body")


async def assert_readable(page: Page, *expected: str) -> str:
    """The page is ours and says what it should: never Django's bare CSRF 403."""
    text = await text_of(page)
    assert not forbidden_by_csrf(text), f"Django's CSRF page at {page.url}: {text[:500]}"
    for words in expected:
        assert words in text, f"{words!r} not on {page.url}: {text[:1500]}"
    return text


class Person:
    """The person at the browser: signs in when asked, reads the consent page, presses a button."""

    def __init__(self, page: Page, shots: Screenshots, username: str, password: str) -> None:
        self.page, self.shots = page, shots
        self.username, self.password = username, password
        self.consent_pages: list[str] = []

    async def open(self, url: str) -> None:
        """Open an authorization URL; sign in if the server asks."""
        await self.page.goto(url)
        if "/oauth/login" in self.page.url:
            await assert_readable(self.page, "Sign in")
            await self.shots.take(self.page, "sign-in")
            await sign_in(self.page, self.username, self.password)

    async def decide(self, allow: bool) -> None:
        """On the consent page: press Allow or Deny, and follow the redirect to the client's listener."""
        self.consent_pages.append(await assert_readable(self.page, "Allow", "Deny"))
        await self.shots.take(self.page, "consent")
        async with self.page.expect_navigation(url="**/callback?**"):
            await self.page.click("button[name=allow]" if allow else "button:text-is('Deny')")
        await self.shots.take(self.page, "back-at-the-client")


def sdk_client(
    server: DaphneServer, provider: OAuthClientProvider, mode: str
) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0))
    client = Client(
        streamable_http_client(server.mcp_url(SECURE_SLUG), http_client=http),
        mode=mode,  # type: ignore[arg-type]
        read_timeout_seconds=REQUEST_SECONDS,
        cache=None,
    )
    return http, client


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_au_a_person_connects_the_sdk_client_in_the_browser_and_steps_up_to_the_vault_scope(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots, mode: str
) -> None:
    """Dynamic registration, sign-in, Allow, code and state back at the loopback listener, PKCE exchange, MCP
    calls; then `read_vault` answers 403 insufficient_scope and the person allows `secure:vault` too."""
    person = Person(await context.new_page(), shots, SECURE_USER, SECURE_PASSWORD)
    opened: list[str] = []

    async def redirect_handler(url: str) -> None:
        opened.append(url)
        await person.open(url)
        await person.decide(allow=True)

    async def callback_handler() -> AuthorizationCodeResult:
        params = await callback.next()
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=oauth_server.mcp_url(SECURE_SLUG),
        client_metadata=OAuthClientMetadata(
            client_name=f"Browser-connected SDK client ({mode})",
            redirect_uris=[callback.url],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http, client = sdk_client(oauth_server, provider, mode)
    async with http, client:
        hello = await client.call_tool("say_hello", {"name": "Ada"})
        assert texts(hello) == ["Hello from the secure server, Ada!"]
        assert len(opened) == 1
        first = callback.received[0]
        assert first["code"] and first["state"] and first["iss"] == oauth_server.url
        assert f"Browser-connected SDK client ({mode})" in person.consent_pages[0]
        assert "registered itself (dynamic client registration)" in person.consent_pages[0]

        vault = await client.call_tool("read_vault", {})
        assert texts(vault) == ["The vault says: keep your tokens audience-bound."]
        assert len(opened) == 2, "the step-up went through the browser once more"
        # Still signed in: the second trip shows the consent page straight away, naming the new permission.
        assert "Call the tool read_vault" in person.consent_pages[1]
        assert "secure:vault" in (storage.tokens.scope or "").split()
    assert [path.name for path in shots.taken] == [
        "01-sign-in.png",
        "02-consent.png",
        "03-back-at-the-client.png",
        "04-consent.png",
        "05-back-at-the-client.png",
    ]


async def start_authorization(server: DaphneServer, callback: Callback) -> tuple[str, str, str, str]:
    """Register a public client for `callback` and return (client_id, verifier, state, authorization URL)."""
    registered = await register(server.url, client_name="Browser test client", redirect_uris=[callback.url])
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce_pair()
    state = "state-" + verifier[:12]
    url = authorize_url(
        server.url,
        client_id=client_id,
        response_type="code",
        redirect_uri=callback.url,
        state=state,
        code_challenge=challenge,
        code_challenge_method="S256",
        resource=server.mcp_url(SECURE_SLUG),
        scope="mcp:tools",
    )
    return client_id, verifier, state, url


async def exchange(server: DaphneServer, callback: Callback, client_id: str, verifier: str, code: str) -> str:
    """Trade the code for a token (PKCE) and return it once the MCP endpoint accepted it."""
    answer = await token_request(
        server.url,
        grant_type="authorization_code",
        code=code,
        redirect_uri=callback.url,
        client_id=client_id,
        code_verifier=verifier,
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        opened = await http.post(
            server.mcp_url(SECURE_SLUG),
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
        )
    assert opened.status_code == 200, opened.text
    assert opened.json()["result"]["serverInfo"]["name"]
    return token


async def test_au_a_person_who_presses_deny_sends_the_client_access_denied_with_its_state(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots
) -> None:
    _, _, state, url = await start_authorization(oauth_server, callback)
    person = Person(await context.new_page(), shots, SECURE_USER, SECURE_PASSWORD)
    await person.open(url)
    await person.decide(allow=False)
    params = await callback.next()
    assert params == {"error": "access_denied", "state": state, "iss": oauth_server.url}


async def test_a_wrong_password_shows_the_sign_in_page_again_with_a_readable_error(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots
) -> None:
    client_id, verifier, _, url = await start_authorization(oauth_server, callback)
    page = await context.new_page()
    await page.goto(url)
    await sign_in(page, SECURE_USER, "not-the-password")
    await assert_readable(page, "Your username and password did not match")
    assert "/oauth/login" in page.url
    await shots.take(page, "wrong-password")
    await sign_in(page, SECURE_USER, SECURE_PASSWORD)
    person = Person(page, shots, SECURE_USER, SECURE_PASSWORD)
    await person.decide(allow=True)
    await exchange(oauth_server, callback, client_id, verifier, (await callback.next())["code"])


async def test_a_non_member_is_told_why_and_signs_in_as_someone_else_from_either_page(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots
) -> None:
    """Consent page's "Sign in as someone else" → a non-member → the no-access page → its own button → a member."""
    client_id, verifier, _, url = await start_authorization(oauth_server, callback)
    page = await context.new_page()
    member = Person(page, shots, SECURE_USER, SECURE_PASSWORD)
    await member.open(url)
    await assert_readable(page, f"Signed in as {SECURE_USER}")
    await page.get_by_role("button", name="Sign in as someone else").click()
    await page.wait_for_url("**/oauth/login?**")
    await sign_in(page, OUTSIDER, OUTSIDER_PASSWORD)
    await assert_readable(page, "You cannot grant access", OUTSIDER, "Ask an owner of the server to add you")
    await shots.take(page, "not-a-member")
    await page.get_by_role("button", name="Sign in as someone else").click()
    await page.wait_for_url("**/oauth/login?**")
    await sign_in(page, SECURE_USER, SECURE_PASSWORD)
    await member.decide(allow=True)
    await exchange(oauth_server, callback, client_id, verifier, (await callback.next())["code"])


async def test_a_sign_in_that_ended_before_allow_asks_to_sign_in_again_and_then_completes(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots
) -> None:
    client_id, verifier, state, url = await start_authorization(oauth_server, callback)
    page = await context.new_page()
    person = Person(page, shots, SECURE_USER, SECURE_PASSWORD)
    await person.open(url)
    await assert_readable(page, "Allow")
    # The server forgets the sign-in (expiry, or a sign-out elsewhere) while the consent page is open.
    django_shell(
        oauth_server.env,
        "from django.contrib.sessions.models import Session\n"
        "from django.contrib.auth import get_user_model\n"
        f"pk = str(get_user_model().objects.get(username={SECURE_USER!r}).pk)\n"
        "for s in Session.objects.all():\n"
        "    if s.get_decoded().get('_auth_user_id') == pk:\n"
        "        s.delete()\n",
    )
    await page.click("button[name=allow]")
    await page.wait_for_url("**/oauth/login?**")
    await assert_readable(page, "Your sign-in ended before you decided")
    await shots.take(page, "sign-in-ended")
    await sign_in(page, SECURE_USER, SECURE_PASSWORD)
    await person.decide(allow=True)
    params = await callback.next()
    assert params["state"] == state
    await exchange(oauth_server, callback, client_id, verifier, params["code"])


async def test_a_form_sent_with_a_stale_csrf_cookie_explains_itself_and_leads_back_to_the_flow(
    oauth_server: DaphneServer, context: BrowserContext, callback: Callback, shots: Screenshots
) -> None:
    client_id, verifier, _, url = await start_authorization(oauth_server, callback)
    page = await context.new_page()
    await page.goto(url)
    await context.clear_cookies()  # cookies dropped while the sign-in page was open
    await sign_in(page, SECURE_USER, SECURE_PASSWORD)
    await assert_readable(page, "This form has expired", "Nothing was changed")
    await shots.take(page, "form-expired")
    async with page.expect_navigation():
        await page.get_by_role("link", name="Open the page again").click()
    await sign_in(page, SECURE_USER, SECURE_PASSWORD)
    await Person(page, shots, SECURE_USER, SECURE_PASSWORD).decide(allow=True)
    await exchange(oauth_server, callback, client_id, verifier, (await callback.next())["code"])
