"""The admin home in a real browser (AMB-270): an owner lands on her MCP servers, copies the URL."""

from __future__ import annotations

import uuid

import pytest
from playwright.async_api import Page, expect

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


async def test_an_owner_lands_on_her_tenant_copies_its_mcp_url_and_sees_no_other_tenant(
    page: Page, server: DaphneServer, request: pytest.FixtureRequest
) -> None:
    tag = uuid.uuid4().hex[:8]
    mine, theirs, owner = f"home-{tag}", f"other-{tag}", f"owner-{tag}"
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom mcp_app.models import Tool\n"
        "from tenants.models import Membership, Tenant\n"
        f"t = Tenant.objects.create(slug={mine!r}, name='My server', auth_mode='public')\n"
        f"Tenant.objects.create(slug={theirs!r}, name='Not mine', auth_mode='public')\n"
        f"u = get_user_model().objects.create_user({owner!r}, password='owner-pw-long-1', is_staff=True)\n"
        "Membership.objects.create(user=u, tenant=t, role='owner')\n"
        "Tool.objects.create(tenant=t, name='hello', handler='template', handler_config={'text': 'Hi'})\n",
    )
    problems: list[str] = []
    # A failed load is named by its response below (the favicon's 404 is another issue's: issue 24 "Polish").
    page.on(
        "console",
        lambda m: (
            problems.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            problems.append(f"{r.status} {r.url}") if r.status >= 400 and "favicon" not in r.url else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, owner, "owner-pw-long-1")
    text = await body_text(page)
    assert "Your MCP servers" in text and "My server" in text, text[:2000]
    assert theirs not in text and "Not mine" not in text
    # Infrastructure stays out of an owner's admin.
    assert "Access attempts" not in text and "Grants" not in text and "Mcp sessions" not in text
    card = page.locator(f"article.tenant-card[data-slug={mine}]")
    assert (await card.locator("code.mcp-url").inner_text()).strip() == server.mcp_url(mine)
    assert "1 tool ·" in await card.locator("dd.definitions").inner_text()
    assert "0 calls" in await card.locator("dd.usage").inner_text()
    await shots.take(page, "owner-home")

    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    button = card.get_by_role("button", name=f"Copy the MCP URL of {mine}")
    await button.click()
    await expect(button).to_have_text("Copied")
    assert await page.evaluate("navigator.clipboard.readText()") == server.mcp_url(mine)

    # The quick links lead where they say.
    async with page.expect_navigation():
        await card.get_by_role("link", name="Connect a client").click()
    assert page.url == f"{server.url}/t/{mine}/connect"
    await page.go_back()
    async with page.expect_navigation():
        await card.get_by_role("link", name="1 tool", exact=True).click()
    assert "hello" in await body_text(page)

    await page.emulate_media(color_scheme="dark")
    await page.goto(f"{server.url}/admin/")
    await page.wait_for_load_state("networkidle")
    await shots.take(page, "owner-home-dark")
    assert problems == [], problems
