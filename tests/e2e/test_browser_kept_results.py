"""Kept results in Chromium (AMB-374, issue 36 §3): the owner finds "Kept results" on a tool's page, is
told in words why a tool not marked read-only and idempotent may not keep them, and keeps a marked tool's
results 60 s, published; the API shows what was saved."""

from __future__ import annotations

import asyncio
import json
import secrets

import pytest
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]


def tools(server: DaphneServer, slug: str) -> dict[str, int]:
    out = django_shell(
        server.env,
        "import json\nfrom mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "marked = {'readOnlyHint': True, 'idempotentHint': True}\n"
        "a = Tool.objects.create(tenant=t, name='lookup', annotations=marked, handler='template', handler_config={'text': 'x'}, version=1)\n"
        "b = Tool.objects.create(tenant=t, name='change_things', handler='template', handler_config={'text': 'y'}, version=1)\n"
        "print(json.dumps({'lookup': a.pk, 'change_things': b.pk}))\n",
    )
    return json.loads(out.strip().splitlines()[-1])


def kept(server: DaphneServer, pk: int) -> str:
    out = django_shell(
        server.env,
        f"from mcp_app.models import Tool\nt = Tool.objects.get(pk={pk})\nprint(t.result_cache_seconds, t.version)\n",
    )
    return out.strip().splitlines()[-1]


async def test_an_owner_keeps_a_read_only_tools_results_and_is_told_why_another_may_not(
    server: DaphneServer, page: Page
) -> None:
    slug = f"kept-{secrets.token_hex(3)}"
    ids = await asyncio.to_thread(tools, server, slug)
    await signed_in(page, server)

    before = {name: await asyncio.to_thread(kept, server, pk) for name, pk in ids.items()}
    await page.goto(f"{server.url}/admin/mcp_app/tool/{ids['change_things']}/change/")
    assert "Kept results" in await body_text(page)
    await page.fill("#id_result_cache_seconds", "60")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    refused = await page.inner_text(".field-result_cache_seconds")
    assert "Only a tool marked readOnlyHint and idempotentHint (true) may have its results kept" in refused
    assert (
        await asyncio.to_thread(kept, server, ids["change_things"]) == before["change_things"]
    )  # nothing saved

    await page.goto(f"{server.url}/admin/mcp_app/tool/{ids['lookup']}/change/")
    await page.fill("#id_result_cache_seconds", "60")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "errornote" not in await page.content(), await body_text(page)
    seconds, version = before["lookup"].split()
    assert seconds == "0"
    assert await asyncio.to_thread(kept, server, ids["lookup"]) == f"60 {int(version) + 1}"  # published
