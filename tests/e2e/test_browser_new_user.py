"""What a new user meets in a browser, signed in to nothing (AMB-290, AMB-291): `/` says what the platform
is and leads to the public demo; the demo's MCP URL shows its connect page; a private tenant's page asks
to sign in exactly as a missing one does, and a member who signs in lands on it."""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from mcp_app.demo.secure import SECURE_USERNAME
from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots
from tests.e2e.oauth_flow import SECURE_PASSWORD
from tests.e2e.servers import DaphneServer

pytestmark = [pytest.mark.e2e]


async def test_a_stranger_goes_from_the_front_page_to_the_demos_connect_page_without_signing_in(
    page: Page, server: DaphneServer, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/")
    text = await body_text(page)
    assert "This site hosts MCP servers." in text and "Try the demo" in text
    assert f"{server.url}/t/demo/mcp" in text
    await shots.take(page, "front")
    async with page.expect_navigation():
        await page.get_by_role("link", name="Connect to the demo").click()
    assert page.url == f"{server.url}/t/demo/connect"
    text = await body_text(page)
    assert "Public." in text and "Claude Code" in text and "your role" not in text
    assert '"name": "echo"' in (await page.locator("#result-legacy-tools").text_content() or "")
    await shots.take(page, "connect")
    # The MCP URL itself, and /t/<slug>, opened in the browser: the same page, no sign-in.
    for path in ("/t/demo/mcp", "/t/demo"):
        response = await page.goto(f"{server.url}{path}")
        assert response is not None and response.status == 200, path
        assert page.url == f"{server.url}/t/demo/connect", path
        assert "Sign in" not in await page.title()


async def test_a_private_tenants_page_asks_a_stranger_to_sign_in_as_a_missing_one_does_and_a_member_lands_on_it(
    page: Page, server: DaphneServer, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    seen = {}
    for slug in ("secure", "no-such-tenant"):
        response = await page.goto(f"{server.url}/t/{slug}/connect")
        assert response is not None and response.status == 200
        assert page.url == f"{server.url}/oauth/login?next=/t/{slug}/connect"
        seen[slug] = (await body_text(page)).replace(slug, "X")
    assert seen["secure"] == seen["no-such-tenant"]
    await shots.take(page, "sign-in")
    # The seeded OAuth tenant's member signs in there and comes back to its page.
    await page.goto(f"{server.url}/t/secure/mcp")
    assert page.url == f"{server.url}/oauth/login?next=/t/secure/connect"
    await page.fill("#id_username", SECURE_USERNAME)
    await page.fill("#id_password", SECURE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    assert page.url == f"{server.url}/t/secure/connect"
    assert "OAuth." in await body_text(page)
    await shots.take(page, "member")
