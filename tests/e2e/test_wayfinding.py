"""A tenant's URLs slightly wrong, on a real Daphne (AMB-230, AMB-231): a person is led to the right page,
the official SDK client is told the right URL, and the right URL works as ever."""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def test_the_sdk_client_works_on_the_right_url_and_fails_clearly_on_the_wrong_case(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url("demo")) as client:
        listed = await client.list_tools()
        assert "echo" in {tool.name for tool in listed.tools}
    with pytest.raises(Exception) as failed:  # noqa: PT011 - the SDK wraps the 404 in its own error types
        async with mcp_client(server.mcp_url("Demo")) as client:
            await client.list_tools()
    assert "404" in repr(failed.value) or "/t/demo/mcp" in repr(failed.value)


async def test_a_person_opening_the_mcp_url_lands_on_the_connect_page(page: Page, server: DaphneServer) -> None:
    await signed_in(page, server)
    for path in ("/t/demo/mcp", "/t/demo", "/t/Demo/mcp", "/t/DEMO"):
        response = await page.goto(f"{server.url}{path}")
        assert response is not None and response.status == 200, path
        assert page.url == f"{server.url}/t/demo/connect", path
        assert "Claude" in await body_text(page), path
    response = await page.goto(f"{server.url}/t/no-such-tenant/mcp")
    assert response is not None and response.status == 404
    assert "Nothing here" in await body_text(page)
