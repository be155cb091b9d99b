"""An owner adds an upstream from a registry in Chromium (AMB-373): the registry is this platform itself
serving v0.1 (AMB-372) for a tenant its owner listed; search, "Use this", the filled add form saved, and
Test connection reaching the listed tenant through the URL the registry gave. Nothing is published."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


async def test_an_owner_finds_a_listed_server_in_a_registry_and_adds_it_as_an_upstream(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    listed, mine = f"reg-listed-{secrets.token_hex(3)}", f"reg-mine-{secrets.token_hex(3)}"
    await asyncio.to_thread(
        django_shell,
        server.env,
        "from tenants.models import Tenant\n"
        f"Tenant.objects.create(slug={listed!r}, name='Listed weather', auth_mode='public', registry_listed=True)\n"
        f"Tenant.objects.create(slug={mine!r}, name={mine!r}, auth_mode='public')\n",
    )
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)

    await page.goto(f"{server.url}/admin/mcp_app/upstream/")
    async with page.expect_navigation():
        await page.click("#from-registry")
    await page.fill("#id_registry", server.url)
    await page.fill("#id_search", listed)
    async with page.expect_navigation():
        await page.click("#registry-search input[type=submit]")
    results = await page.inner_text("#registry-results")
    assert f"/{listed}" in results and f"{server.url}/t/{listed}/mcp" in results
    await shots.take(page, "search")

    async with page.expect_navigation():
        await page.locator("a.use-remote").first.click()
    assert "Filled from" in await body_text(page)
    assert await page.input_value("#id_url") == f"{server.url}/t/{listed}/mcp"
    assert await page.input_value("#id_name") == listed
    await page.select_option("#id_tenant", label=mine)
    async with page.expect_navigation():
        await page.click("input[name=_continue]")
    assert "was added successfully" in await body_text(page)

    async with page.expect_navigation():
        await page.get_by_role("link", name="Test connection").click()
    assert (await page.inner_text("#upstream-server")).strip().startswith("Listed weather")
    await shots.take(page, "test-connection")
