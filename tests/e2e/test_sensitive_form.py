"""A sensitive form through the SDK client and a real browser: the key goes to the page, never the client.

The SDK's elicitation callback gets a URL-mode request, opens its page in Chromium (as a client
opens the person's browser), where the person types the key and sends it; the tool then answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from mcp_types import ElicitResult
from playwright.async_api import Browser

from tests.e2e.browser import PAGE_MS, Screenshots, chromium
from tests.e2e.helpers import sdk_client, wait_until_served
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

CONFIG = {
    "message": "Connect {{ service }}",
    "sensitive": True,
    "fields": {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "title": "API key", "minLength": 8},
            "region": {"type": "string", "enum": ["eu", "us"]},
        },
        "required": ["api_key", "region"],
    },
    "text": "Connected {{ service }} in {{ region }}.",
}


@pytest.fixture(scope="module")
def connect_tool(server: DaphneServer) -> Iterator[str]:
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='connect_service', "
        f"defaults=dict(handler='form', handler_config={CONFIG!r}, timeout_seconds=60))\n",
    )
    wait_until_served(server.mcp_url(), "connect_service")
    yield "connect_service"
    django_shell(
        server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='connect_service').delete()\n"
    )


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_person_types_the_key_on_the_platforms_page_and_the_client_never_sees_it(
    server: DaphneServer, connect_tool: str, browser: Browser, mode: str, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    seen: list[Any] = []

    async def open_in_browser(context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        page = await browser.new_page()
        page.set_default_timeout(PAGE_MS)
        await page.goto(params.url)
        await shots.take(page, "form")
        await page.get_by_label("API key").fill("sk-live-123456")
        await page.get_by_label("region").select_option("eu")
        await page.get_by_role("button", name="Send").click()
        await page.get_by_role("status").wait_for()
        await shots.take(page, "sent")
        await page.close()
        return ElicitResult(action="accept")

    async with sdk_client(
        server.mcp_url(),
        mode,
        elicitation_callback=open_in_browser,
    ) as client:
        result = await client.call_tool(connect_tool, {"service": "Acme"})
    assert [p.mode for p in seen] == ["url"]
    assert seen[0].url.startswith(server.url + "/t/demo/form/")
    assert result.content[0].text == "Connected Acme in eu."
    assert "sk-live-123456" not in str(result)
