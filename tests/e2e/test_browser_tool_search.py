"""An owner tries search mode in Chromium (AMB-376): "Search as a client" on the tools list, a search by a
shortened word finding the tool first with its arguments and a link to its Try page, browsing in name
order, then switching the tenant to search mode in its settings; a client's tools/list then holds the
three discovery tools."""

from __future__ import annotations

import asyncio
import secrets

import httpx
import pytest
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import modern_request
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


async def test_an_owner_searches_as_a_client_then_switches_the_tenant_to_search_mode(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    slug = f"srch-{secrets.token_hex(3)}"
    await asyncio.to_thread(
        django_shell,
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "schema = {'type': 'object', 'properties': {'city': {'type': 'string'}}}\n"
        "Tool.objects.create(tenant=t, name='get_weather_forecast', title='Weather', description='Forecast by city.',"
        " input_schema=schema, handler='template', handler_config={'text': 'sunny'})\n"
        "for n in range(30):\n"
        "    Tool.objects.create(tenant=t, name=f'other_{n:02d}', description='Something else.', handler='template',"
        " handler_config={'text': 'x'})\n",
    )
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)

    await page.goto(f"{server.url}/admin/mcp_app/tool/")
    async with page.expect_navigation():
        await page.click("#try-search-link")
    await page.select_option("#id_tenant", slug)
    await page.fill("#id_q", "forec")
    async with page.expect_navigation():
        await page.click("#try-search-submit")
    first = page.locator("#try-search-results tbody tr").first
    assert "get_weather_forecast" in await first.inner_text() and "city" in await first.inner_text()
    await shots.take(page, "search")
    async with page.expect_navigation():
        await first.get_by_role("link", name="Try it").click()
    assert "Try get_weather_forecast" in await body_text(page)

    await page.go_back()
    await page.fill("#id_q", "")
    async with page.expect_navigation():
        await page.click("#try-browse-submit")
    rows = await page.locator("#try-search-results tbody tr td:first-child code").all_inner_texts()
    assert rows == sorted(rows) and len(rows) == 20 and rows[0] == "get_weather_forecast"

    await page.goto(f"{server.url}/admin/tenants/tenant/?q={slug}")
    async with page.expect_navigation():
        await page.get_by_role("link", name=slug, exact=True).first.click()
    await page.select_option("#id_tool_discovery", "search")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    assert "was changed successfully" in await body_text(page)
    async with httpx.AsyncClient(timeout=30) as http:
        body, headers = modern_request("tools/list")
        listed = (await http.post(server.mcp_url(slug), json=body, headers=headers)).json()
    assert [t["name"] for t in listed["result"]["tools"]] == ["browse_tools", "call_tool", "search_tools"]
