"""The Content-Security-Policy in a real browser: every page a person opens runs with no violation.

Chromium reports each blocked script, style, image or eval on the console; a page with one is broken
for a person even when its HTML is right. The pages with scripts of their own are all here: the JSON
editors and the Try page, a run's live view, the connect page's copy buttons, the dashboard, the API's
documentation page, the front page and the tokens page.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text, run_try, signed_in
from tests.e2e.browser import settled
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


def first_tool_pk(server: DaphneServer, name: str) -> int:
    out = django_shell(
        server.env,
        f"from mcp_app.models import Tool; print(Tool.objects.get(tenant__slug='demo', name={name!r}).pk)",
    )
    return int(out.strip().splitlines()[-1])


async def test_the_pages_a_person_opens_run_without_a_content_security_policy_violation(
    page: Page, server: DaphneServer
) -> None:
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text
            else None
        ),
    )
    page.on("pageerror", lambda error: violations.append(f"{page.url}: {error}"))
    await signed_in(page, server)
    echo = first_tool_pk(server, "echo")
    for path, ready in (
        ("/", "Your MCP servers"),
        (f"/admin/mcp_app/tool/{echo}/change/", "Input schema"),
        (f"/admin/mcp_app/tool/{echo}/try/", "Run"),
        ("/t/demo/connect", "Claude"),
        ("/t/demo/dashboard", "Calls per tool"),
        ("/api-tokens", "API tokens"),
        ("/api/v1/docs/", "management API"),
    ):
        response = await page.goto(f"{server.url}{path}")
        assert response is not None and response.status == 200, path
        assert "frame-ancestors 'none'" in (response.headers.get("content-security-policy") or ""), path
        await settled(page)
        assert ready in await body_text(page), path
    # A person makes an API token on its page: shown once, and it opens the API.
    await page.goto(f"{server.url}/api-tokens")
    await page.click("text=Make a token")
    token = (await page.inner_text("#new-token")).strip()
    listed = await page.request.get(
        f"{server.url}/api/v1/tenants/", headers={"authorization": f"Bearer {token}"}
    )
    assert listed.status == 200 and "demo" in await listed.text()
    # The Try page's script ran: a run streams its result back into the page.
    await page.goto(f"{server.url}/admin/mcp_app/tool/{echo}/try/")
    await page.locator("#try-fields [data-path=message] input").fill("csp")
    heading, result = await run_try(page)
    assert "csp" in result, heading
    assert violations == []
