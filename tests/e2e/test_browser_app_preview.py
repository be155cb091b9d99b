"""An MCP App's preview on its resource's admin page, in a real browser (AMB-275)."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.browser import Screenshots
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


async def test_the_dice_app_runs_in_its_sandboxed_preview_without_a_console_error(
    page: Page, server: DaphneServer, request: pytest.FixtureRequest
) -> None:
    out = django_shell(
        server.env,
        "from mcp_app.models import Resource\n"
        "print(Resource.objects.get(tenant__slug='demo', uri='ui://demo/dice.html').pk)",
    )
    pk = int(out.strip().splitlines()[-1])
    problems: list[str] = []
    # A failed load is named by its response below (the favicon's 404 is another issue's: issue 24 "Polish").
    page.on(
        "console",
        lambda m: problems.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None,
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 and "favicon" not in r.url else None,
    )
    shots = Screenshots(request.node.name)
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/resource/{pk}/change/")
    assert "App preview" in await body_text(page)
    frame = page.locator("iframe.app-preview")
    assert await frame.get_attribute("sandbox") == "allow-scripts"
    app = page.frame_locator("iframe.app-preview")
    # The app's own script ran (it replaced "Starting…" and sent ui/initialize); no host answers here,
    # so its button stays disabled.
    await expect(app.locator("#status")).to_have_text("Waiting for a roll…")
    await expect(app.get_by_role("button", name="Roll again")).to_be_disabled()
    await page.wait_for_load_state("networkidle")
    await shots.take(page, "app-preview")
    await frame.screenshot(path=str(shots.folder / "02-app-frame.png"))  # the frame alone, as rendered
    assert problems == [], problems
