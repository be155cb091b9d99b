"""The self-check in a real browser: the demo tenant's report, a broken tool found, named and linked to
its page, and the warning a save of it shows (light and dark mode, no console error)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import ConsoleMessage, Page

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.browser import Screenshots
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]

TOOL = "selfcheck.broken"
# axe-core's impacts a page of this issue must not have (issue 24, "Tests").
SERIOUS = ("serious", "critical")


async def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical accessibility violations of the page's own content as it is now
    (the admin's header and breadcrumbs are Django's, the same on every admin page)."""
    results = await Axe().run(page, context="#content")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v.get("impact") in SERIOUS
    ]


@pytest.fixture
def broken_tool(server: DaphneServer) -> Iterator[tuple[int, int]]:
    """A demo tool whose schema's example its own validation refuses (and a dotted name); removed after."""
    out = django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='greet')\n"
        f"tool.pk = None\ntool.name = {TOOL!r}\n"
        "tool.input_schema = {**tool.input_schema, 'examples': [{'name': 42}]}\ntool.save()\n"
        "print('PK', tool.pk, tool.tenant_id)\n",
    )
    tool_pk, tenant_pk = out.split("PK", 1)[1].split()[:2]
    yield int(tool_pk), int(tenant_pk)
    django_shell(
        server.env, f"from mcp_app.models import Tool\nTool.objects.filter(name={TOOL!r}).delete()\n"
    )


async def test_an_editor_checks_the_demo_tenant_follows_the_fix_link_and_sees_the_warning_on_save(
    server: DaphneServer, broken_tool: tuple[int, int], page: Page, request: pytest.FixtureRequest
) -> None:
    tool_pk, tenant_pk = broken_tool
    console: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        # The browser's own favicon request (a 404: the site has none) is no error of these pages.
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            console.append(f"{page.url}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console.append(f"{page.url}: {error}"))
    shots = Screenshots(request.node.name)
    await signed_in(page, server)

    # From the tenant's page, as a person finds it.
    await page.goto(f"{server.url}/admin/tenants/tenant/{tenant_pk}/change/")
    async with page.expect_navigation():
        await page.click("#check-tenant")
    text = await body_text(page)
    summary = await page.inner_text("#self-check-summary")
    assert "Tenant demo:" in summary and "1 error" in summary, summary
    section = page.locator("section.self-check-definition", has_text=TOOL)
    assert "Example 1 of the input schema is refused" in await section.inner_text()
    assert "summarize" in text and "sampling" in text  # what needs a client capability
    await shots.take(page, "report-light")
    assert await serious_violations(page) == []
    await page.emulate_media(color_scheme="dark")
    await shots.take(page, "report-dark")
    assert await serious_violations(page) == []
    await page.emulate_media(color_scheme="light")

    # The fix link leads to the tool; saving it unchanged keeps it, with the self-check's warning.
    async with page.expect_navigation():
        await section.locator("a.self-check-fix").click()
    assert page.url.endswith(f"/admin/mcp_app/tool/{tool_pk}/change/")
    async with page.expect_navigation():
        await page.click("input[name=_continue]")
    warnings = await page.locator("ul.messagelist li.warning").all_inner_texts()
    assert any("Example 1 of the input schema is refused" in w for w in warnings), warnings
    assert "was changed successfully" in await body_text(page)
    await shots.take(page, "saved-with-warning")

    # The tools' list links to the check too.
    await page.goto(f"{server.url}/admin/mcp_app/tool/?tenant__id__exact={tenant_pk}")
    assert await page.locator("a.self-check-link", has_text="Check demo").count() == 1
    # Only this feature's pages: the tool's change page logs its JSON editor's worker, refused by the CSP.
    assert [c for c in console if f"/tool/{tool_pk}/change/" not in c] == []
