"""An operator follows a background run in the admin, in a real browser, and cancels it.

The SDK client calls a slow background tool on the real Celery worker; the run's admin page shows
its progress live; Cancel stops the worker and the waiting client gets an error result saying so.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from mcp import Client
from playwright.async_api import Page, expect

from tests.e2e.browser import PAGE_MS, Screenshots, sign_in
from tests.e2e.helpers import REQUEST_SECONDS
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def test_an_operator_watches_a_background_runs_progress_and_cancels_it(
    server: DaphneServer, celery_worker: ServerProcess, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    async with Client(server.mcp_url("demo"), mode="legacy", read_timeout_seconds=REQUEST_SECONDS) as client:
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        call = asyncio.create_task(
            client.call_tool("count_in_background", {"n": 50, "delay": 0.3}, progress_callback=on_progress)
        )
        async with asyncio.timeout(REQUEST_SECONDS):
            while len(progress) < 2:
                await asyncio.sleep(0.1)
        await page.goto(f"{server.url}/admin/mcp_app/toolrun/?status__exact=running")
        async with page.expect_navigation():
            await page.get_by_role("link", name="count_in_background").first.click()
        # The bar moves while the page is open (the page polls the run every second).
        text = page.locator("#run-progress-text")
        await expect(text).to_have_text(re.compile(r"^\d+ / 50"))
        first = int((await text.inner_text()).split()[0])
        await expect(text).not_to_have_text(re.compile(rf"^{first} / 50"))
        assert '"n": 50' in await page.inner_text("body")
        await shots.take(page, "running")
        async with page.expect_navigation():
            await page.get_by_role("button", name="Cancel this run").click()
        await expect(page.locator("#run-status")).to_have_text("cancelled", timeout=PAGE_MS)
        await shots.take(page, "cancelled")
        result = await asyncio.wait_for(call, REQUEST_SECONDS)
    assert result.is_error
    assert "An operator stopped this call" in result.content[0].text and "admin" in result.content[0].text
    assert "Cancelled in the admin by admin" in await page.inner_text("body")
