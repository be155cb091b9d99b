"""Every page a person opens, in Chromium, in light and in dark mode: no console error, no failed request
(the favicon's included), no serious or critical axe-core violation, and a full-page screenshot of each.

PAGES is the one list of a signed-in person's pages, ANONYMOUS of a stranger's (swept first): add a page
there and it is swept. A path may name `{tool}`, `{prompt}`,
`{resource}` (the demo tenant's first of each), `{tenant}` (the demo tenant's id) and `{upstream}` (an
upstream server of a tenant of its own, synced from a real upstream the test runs). The screenshots
go to $MCP_SCREENSHOT_DIR (a temporary folder when unset; .ci/run sets one under its run and says where).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, ConsoleMessage, Page, Request, Response, expect

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.browser import PAGE_MS, chromium, settled, sign_in, track_requests
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell
from tests.upstreams.running import running_upstream

pytestmark = [pytest.mark.e2e]


@dataclass(frozen=True)
class Swept:
    name: str  # the screenshot's file name
    path: str  # may name {tool}, {prompt}, {resource}, {tenant}
    ready: str  # text the page shows once it is there


# What a stranger sees, signed in to nothing (AMB-290, AMB-291).
ANONYMOUS = (
    Swept("front-anonymous", "/", "This site hosts MCP servers"),
    Swept("connect-anonymous", "/t/demo/connect", "Claude"),
    Swept("sign-in", "/t/secure/connect", "Username"),
)
PAGES = (
    Swept("front", "/", "Your MCP servers"),
    Swept("admin-home", "/admin/", "Site administration"),
    Swept("tools", "/admin/mcp_app/tool/", "Select tool to change"),
    Swept("tool", "/admin/mcp_app/tool/{tool}/change/", "Input schema"),
    Swept("tool-add", "/admin/mcp_app/tool/add/", "Output schema"),
    Swept("prompts", "/admin/mcp_app/prompt/", "Select prompt to change"),
    Swept("prompt", "/admin/mcp_app/prompt/{prompt}/change/", "Messages"),
    Swept("resources", "/admin/mcp_app/resource/", "Select resource to change"),
    Swept("resource", "/admin/mcp_app/resource/{resource}/change/", "Uri"),
    Swept("connect", "/t/demo/connect", "Claude"),
    Swept("dashboard", "/t/demo/dashboard", "Calls per tool"),
    Swept("tenant", "/admin/tenants/tenant/{tenant}/change/", "Export"),
    Swept("import", "/admin/tenants/tenant/{tenant}/import/", "Import"),
    Swept("import-openapi", "/admin/tenants/tenant/{tenant}/import-openapi/", "OpenAPI"),
    Swept("api-tokens", "/api-tokens", "API tokens"),
    Swept("api-tokens-admin", "/admin/mcp_app/apitoken/", "Select API token to change"),
    Swept("my-connections", "/connections/", "connections"),
    Swept("not-found", "/t/no-such-tenant/mcp", "Nothing here"),
    # Authoring (issue 24): drafts, versions, Try, the self-check, templates.
    Swept("drafts", "/admin/mcp_app/tool/drafts/", "Drafts waiting to be published"),
    Swept("tool-draft", "/admin/mcp_app/tool/{tool}/draft/", "clients get"),
    Swept("tool-history", "/admin/mcp_app/tool/{tool}/history/", "Every published version"),
    Swept("try", "/admin/mcp_app/tool/{tool}/try/", "Runs the tool"),
    # Search mode tried (AMB-376): the page with what search_tools found.
    Swept("tool-search", "/admin/mcp_app/tool/search/?tenant=demo&q=count", "Search tools as a client"),
    Swept("self-check", "/admin/tenants/tenant/{tenant}/check/", "Check"),
    Swept("templates", "/admin/mcp_app/resourcetemplate/", "Select resource template to change"),
    # Governance (issue 34): a tenant's policies, the form and the simulator.
    Swept("policies", "/admin/mcp_app/policy/", "Select policy to change"),
    Swept("policy-add", "/admin/mcp_app/policy/add/", "Condition"),
    Swept("policy-simulate", "/admin/mcp_app/policy/simulate/", "Simulate"),
    Swept("quotas", "/admin/mcp_app/quota/", "Select quota to change"),
    Swept("quota-add", "/admin/mcp_app/quota/add/", "Calls allowed per window"),
    Swept("guardrails", "/admin/mcp_app/guardrail/", "Select guardrail to change"),
    Swept("guardrail-add", "/admin/mcp_app/guardrail/add/", "A pattern of your own"),
    Swept("governance-events", "/admin/mcp_app/governanceevent/", "Select governance event to view"),
    # An upstream's own page and its remote tools, with Sync now and the publish buttons (AMB-292).
    Swept("upstream", "/admin/mcp_app/upstream/{upstream}/change/", "Publish all"),
    Swept("remote-tools", "/admin/mcp_app/upstream/{upstream}/tools/", "Publish selected"),
)

# axe-core rules left out, each for markup of Django's own admin that our templates cannot change.
AXE_EXCLUDED_RULES: dict[str, str] = {}
SERIOUS = {"serious", "critical"}
# No preload: axe then fetches every stylesheet itself and resolves the admin's `@import url('widgets.css')`
# against the page's URL, a request of its own that 404s; only its css-orientation-lock rule needs it.
AXE_OPTIONS = {"resultTypes": ["violations"], "preload": False}
AXE_RUN = "options => axe.run(document, options).then(results => results.violations)"
# Each page is checked and screenshotted in both, the first as loaded (see `visit`).
SCHEMES = ("light", "dark")
# Resolves once the page's CSS transitions (which getAnimations() starts, flushing styles) have ended.
FADES_DONE = (
    "Promise.all(document.getAnimations().filter(a => a instanceof CSSTransition).map(a => a.finished.catch(() => null)))"
)


def screenshot_dir() -> Path:
    folder = os.environ.get("MCP_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="mcp-sweep-")
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def demo_ids(server: DaphneServer) -> dict[str, int]:
    out = django_shell(
        server.env,
        "from mcp_app.models import Prompt, Resource, Tool; from tenants.models import Tenant\n"
        "t = Tenant.objects.get(slug='demo')\n"
        "print(Tool.objects.filter(tenant=t, name='echo').first().pk, Prompt.objects.filter(tenant=t).first().pk,"
        " Resource.objects.filter(tenant=t).first().pk, t.pk)",
    )
    tool, prompt, resource, tenant = (int(x) for x in out.strip().splitlines()[-1].split())
    return {"tool": tool, "prompt": prompt, "resource": resource, "tenant": tenant}


def synced_upstream(server: DaphneServer, url: str) -> int:
    """An upstream of a tenant of its own (the demo's self-check never meets it), synced: its id."""
    out = django_shell(
        server.env,
        "from mcp_app.models import Upstream\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        "t, _ = Tenant.objects.get_or_create(slug='sweep', defaults={'name': 'sweep', 'auth_mode': 'public'})\n"
        f"up = Upstream(tenant=t, name='docs-{secrets.token_hex(3)}', url={url!r}, prefix='docs_')\n"
        "up.full_clean(); up.save(); service.sync(up); print(up.pk)\n",
    )
    return int(out.strip().splitlines()[-1])


class Watch:
    """What went wrong on the page since the last `take`: console errors, page errors, failed requests."""

    def __init__(self, page: Page) -> None:
        self.problems: list[str] = []
        page.on("console", self.console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("requestfailed", self.failed)
        page.on("response", self.response)
        self.expected_status: dict[str, int] = {}

    def console(self, message: ConsoleMessage) -> None:
        # Chromium logs the expected 404 of the "not found" page itself as an error too.
        if message.type == "error" and message.location.get("url") not in self.expected_status:
            self.problems.append(f"console error: {message.text}")

    def failed(self, request: Request) -> None:
        self.problems.append(f"request failed: {request.method} {request.url} ({request.failure})")

    def response(self, response: Response) -> None:
        if response.status >= 400 and self.expected_status.get(response.url) != response.status:
            self.problems.append(f"{response.status} on {response.request.method} {response.url}")

    def take(self) -> list[str]:
        taken, self.problems = self.problems, []
        return taken


async def visit(page: Page, watch: Watch, axe: Axe, swept: Swept, url: str, shots: Path) -> list[str]:
    """One page opened once, then checked and screenshotted in each colour scheme (its text, axe-core,
    what went wrong): the problems. The schemes differ only in CSS (`prefers-color-scheme`; no script
    reads it), so switching the emulated media on the loaded page shows what a fresh load in that
    scheme shows, without loading, signing in and settling every page twice."""
    found: list[str] = []
    await page.emulate_media(color_scheme=SCHEMES[0])
    await page.goto(url)
    await settled(page)
    # axe-core once a page (half a megabyte of script to parse), run in each scheme.
    await page.evaluate(axe.axe_script)
    for scheme in SCHEMES:
        await page.emulate_media(color_scheme=scheme)
        # The admin's links fade to a scheme's colours (CSS transitions): checked mid-fade they fail
        # the contrast rule.
        await page.evaluate(FADES_DONE)
        where = f"[{scheme}] {swept.name} ({swept.path})"
        text = await body_text(page)
        if swept.ready.lower() not in text.lower():  # the admin's object tools are upper-cased
            found.append(f"{where}: {swept.ready!r} not on the page")
        for violation in await page.evaluate(AXE_RUN, AXE_OPTIONS):
            if violation["impact"] in SERIOUS and violation["id"] not in AXE_EXCLUDED_RULES:
                targets = [", ".join(map(str, node["target"])) for node in violation["nodes"]][:5]
                found.append(f"{where}: axe {violation['id']} ({violation['impact']}): {targets}")
        await page.screenshot(path=str(shots / f"{swept.name}-{scheme}.png"), full_page=True)
    return found + [
        f"[{'/'.join(SCHEMES)}] {swept.name} ({swept.path}): {problem}" for problem in watch.take()
    ]


async def sweep(
    browser: Browser, server: DaphneServer, part: tuple[Swept, ...], ids: dict[str, int], shots: Path
) -> list[str]:
    context = await browser.new_context(color_scheme=SCHEMES[0], viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_MS)
    page = await context.new_page()
    track_requests(page)
    watch = Watch(page)
    axe = Axe()
    found: list[str] = []
    try:
        for swept in part:
            if swept in ANONYMOUS:
                found += await visit(page, watch, axe, swept, f"{server.url}{swept.path}", shots)
        if any(swept not in ANONYMOUS for swept in part):
            await page.goto(f"{server.url}/admin/")
            await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
            await settled(page)
            found += [f"sign-in: {p}" for p in watch.take()]
        for swept in part:
            if swept in ANONYMOUS:
                continue
            url = f"{server.url}{swept.path.format(**ids)}"
            if swept.name == "not-found":
                watch.expected_status[url] = 404
            found += await visit(page, watch, axe, swept, url, shots)
    finally:
        await context.close()
    return found


# The pages in two parts, a test each: a test stays well under the suite's 90 s hang watchdog
# (tests/conftest.py). The second holds the upstream's pages, which need one synced.
PARTS = {"stranger-and-admin": ANONYMOUS + PAGES[:14], "authoring-and-upstream": PAGES[14:]}


@pytest.mark.parametrize("part", list(PARTS))
async def test_every_page_is_clean_in_light_and_dark(server: DaphneServer, part: str, tmp_path: Path) -> None:
    ids = demo_ids(server)
    shots = screenshot_dir()
    with running_upstream(tmp_path) as remote:
        if any("{upstream}" in swept.path for swept in PARTS[part]):
            ids["upstream"] = synced_upstream(server, remote.url)
        async with chromium() as browser:
            problems = await sweep(browser, server, PARTS[part], ids, shots)
    for scheme in SCHEMES:
        assert all((shots / f"{swept.name}-{scheme}.png").is_file() for swept in PARTS[part])
    assert not problems, f"{len(problems)} problems (screenshots in {shots}):\n" + "\n".join(
        re.sub(r"\s+", " ", p)[:400] for p in problems
    )


def luminance(css_colour: str) -> float:
    """Relative luminance (0 black .. 1 white) of an `rgb(r, g, b)` computed colour."""
    red, green, blue = (int(x) / 255 for x in re.findall(r"\d+", css_colour)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


async def test_the_code_editor_follows_dark_mode_and_its_syntax_worker_runs(server: DaphneServer) -> None:
    """The output schema of a new tool opens in code mode (Ace): dark under a dark scheme, and its JSON
    worker (served from our origin, lib/ace_worker.py) marks a syntax error without a CSP error."""
    async with chromium() as browser:
        context = await browser.new_context(color_scheme="dark")
        context.set_default_timeout(PAGE_MS)
        page = await context.new_page()
        watch = Watch(page)
        await signed_in(page, server)
        await page.goto(f"{server.url}/admin/mcp_app/tool/add/")
        editor = page.locator("[data-json-editor][data-field=output_schema]")
        if "table-mode" in (
            await editor.get_attribute("class") or ""
        ):  # the argument table over it (AMB-261)
            await page.locator("[data-table-for=output_schema] button.structured-toggle").click()
        scroller = editor.locator(".ace_scroller")
        background = await scroller.evaluate("element => getComputedStyle(element).backgroundColor")
        assert luminance(background) < 0.25, background
        await editor.locator(".ace_content").click()
        await page.keyboard.press("End")
        await page.keyboard.type(" {")
        await expect(editor.locator(".ace_gutter-cell.ace_error")).to_be_visible()
        await context.close()
    assert watch.take() == []
