"""What a person does on the admin's structured JSON editors and Try page, for the browser tests."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.async_api import Locator, Page, expect

from tests.e2e.browser import PAGE_MS, forbidden_by_csrf, sign_in
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer

# The Try page's heading once the call is over (its class says how it ended).
FINISHED = re.compile(r"\b(ok|errors|cancelled)\b")


async def body_text(page: Page) -> str:
    """The page's text, failing at once on Django's own CSRF page (what a person must never see)."""
    text = await page.inner_text("body")
    assert not forbidden_by_csrf(text), f"Django's CSRF page at {page.url}: {text[:500]}"
    return text


async def signed_in(page: Page, server: DaphneServer) -> None:
    """Sign in to the admin of `server` as its superuser, through the sign-in form."""
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    await body_text(page)


def json_editor(page: Page, field: str) -> Locator:
    return page.locator(f"[data-json-editor][data-field={field}]")


async def type_json(page: Page, field: str, value: Any) -> None:
    """Switch the field's editor to its plain text mode (its menu) and type the document there (from
    the JSON view, one click away when a table or message editor shows the field: AMB-261)."""
    root = json_editor(page, field)
    if "table-mode" in (await root.get_attribute("class") or ""):  # a table over the JSON: its JSON view
        await page.locator(f"[data-table-for={field}] button.structured-toggle").click()
    await root.locator("button.jsoneditor-modes").click()
    await page.locator(".jsoneditor-contextmenu button.jsoneditor-type-modes", has_text="Text").click()
    text = value if isinstance(value, str) else json.dumps(value, indent=2)
    await root.locator("textarea.jsoneditor-text").fill(text)


async def json_status(page: Page, field: str) -> str:
    """The editor's verdict on what was typed, once the server's check has answered."""
    status = json_editor(page, field).locator(".json-editor-status")
    await expect(status).not_to_have_class(re.compile(r"\bpending\b"), timeout=PAGE_MS)
    return await status.inner_text()


async def run_try(page: Page) -> tuple[str, str]:
    """Press Run on the Try page and wait for the end of the call: (heading, result body)."""
    await page.click("#try-run")
    await expect(page.locator("#try-status")).to_have_class(FINISHED, timeout=PAGE_MS)
    return await page.inner_text("#try-status"), await page.inner_text("#try-result")


async def raw_arguments(page: Page, arguments: dict[str, Any] | str) -> None:
    """Open the raw JSON of the Try page's arguments and type them there."""
    if await page.is_hidden("#id_arguments"):
        await page.click("#try-toggle")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    await page.fill("#id_arguments", text)
