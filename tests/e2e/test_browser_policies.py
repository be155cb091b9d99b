"""Policies in a real browser (AMB-347, AMB-350): an owner writes one in the admin (a condition that
cannot be used is refused on its field, saying why), simulates a caller and sees the decision, the
policy that made it and that caller's lists; then a client of the tenant gets exactly that. A policy
is a draft until published (AMB-362); one that would leave no member a tool is saved only once
confirmed; the simulator takes an identity provider's claims (AMB-359). Quotas (AMB-352) and
guardrails (AMB-354) likewise, from their forms to what a client is answered."""

from __future__ import annotations

import secrets

import pytest
from mcp import MCPError
from playwright.async_api import Page

from tests.e2e.admin_pages import body_text, signed_in
from tests.e2e.browser import Screenshots
from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def test_an_owner_writes_a_policy_simulates_a_caller_and_a_client_gets_what_the_simulator_said(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    slug = f"ruled-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom mcp_app.models import Tool\n"
        "from tenants.models import Membership, Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "for name, hints in [('read_rows', {'readOnlyHint': True}), ('drop_table', {'destructiveHint': True})]:\n"
        "    Tool.objects.create(tenant=t, name=name, handler='template', handler_config={'text': name}, annotations=hints)\n",
    )
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/policy/add/")
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_name", "strangers-read-only")
    await page.fill("#id_condition", "caller.auth == 'anonymous' && target.annotations.all(h, h)")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    assert "comprehensions" in await page.inner_text(".field-condition .errorlist")
    await shots.take(page, "condition-refused")
    await page.fill("#id_condition", "caller.auth == 'anonymous' && !target.annotations.readOnlyHint")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    # A draft (AMB-362): saved, and it governs no call until it is published.
    assert "Saved as a draft: no client sees it until it is published." in await body_text(page)
    assert "draft (never published)" in await page.inner_text("#result_list")
    async with mcp_client(server.mcp_url(slug), mode="auto") as client:
        assert sorted(tool.name for tool in (await client.list_tools()).tools) == ["drop_table", "read_rows"]
    await shots.take(page, "draft")
    async with page.expect_navigation():
        await page.click("#result_list a:text('strangers-read-only')")
    assert "Draft, never published." in await page.inner_text("#draft-status")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "Published strangers-read-only as version 1" in await body_text(page)

    await page.goto(f"{server.url}/admin/mcp_app/policy/")
    async with page.expect_navigation():
        await page.click("#simulate-link")
    await page.select_option("#id_tenant", label=slug)
    await page.select_option("#id_auth", "anonymous")
    await page.select_option("#id_kind", "tool")
    await page.fill("#id_name", "drop_table")
    async with page.expect_navigation():
        await page.click("#simulate")
    assert await page.inner_text("#simulation-decision") == "Denied"
    assert await page.inner_text("#simulation-policy") == "strangers-read-only"
    assert "read_rows" in await page.inner_text("#simulation-lists")
    assert "drop_table" not in await page.inner_text("#simulation-lists")
    await shots.take(page, "simulated")

    for mode in ("legacy", "auto"):
        async with mcp_client(server.mcp_url(slug), mode=mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["read_rows"]
            with pytest.raises(MCPError, match="Unknown tool: drop_table"):
                await client.call_tool("drop_table", {})


async def test_a_policy_leaving_no_member_a_tool_waits_for_a_confirmation_and_claims_decide_in_the_simulator(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    """The confirm round (AMB-356): a policy after which no member keeps a tool is refused with the
    question and a checkbox, and published once it is ticked. The simulator's claims (AMB-359): an
    identity provider's user in the finance group may use `salaries`, one in sales may not."""
    shots = Screenshots(request.node.name)
    slug = f"claimed-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom mcp_app.models import Tool\n"
        "from tenants.models import Membership, Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Membership.objects.create(tenant=t, user=get_user_model().objects.get(username='admin'), role='owner')\n"
        "for name in ('echo', 'salaries'):\n"
        "    Tool.objects.create(tenant=t, name=name, handler='template', handler_config={'text': name})\n",
    )
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/policy/add/")
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_name", "salaries-for-finance")
    await page.fill(
        "#id_condition", "target.name == 'salaries' && !(has(caller.claims.groups) && 'finance' in caller.claims.groups)"
    )
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "Published salaries-for-finance as version 1" in await body_text(page), await page.inner_text("#content")

    await page.goto(f"{server.url}/admin/mcp_app/policy/add/")
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_name", "members-out")
    await page.select_option("#id_applies_to", "tools")
    await page.fill("#id_condition", "caller.auth in ['oauth', 'api_key']")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "no member of the tenant would have a single tool" in await page.inner_text(".field-condition .errorlist")
    await shots.take(page, "asked-to-confirm")
    await page.check("#id_confirm_no_tools")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "Published members-out as version 1" in await body_text(page)

    async def simulated(claims: str) -> str:
        await page.goto(f"{server.url}/admin/mcp_app/policy/simulate/")
        await page.select_option("#id_tenant", label=slug)
        await page.select_option("#id_auth", "identity_provider")
        await page.fill("#id_subject", "ada@example.com")
        await page.fill("#id_claims", claims)
        await page.select_option("#id_kind", "tool")
        await page.fill("#id_name", "salaries")
        async with page.expect_navigation():
            await page.click("#simulate")
        return await body_text(page)

    await simulated('{"groups": ["finance"]}')
    assert await page.inner_text("#simulation-decision") == "Allowed"
    await simulated('{"groups": ["sales"]}')
    assert await page.inner_text("#simulation-decision") == "Denied"
    assert await page.inner_text("#simulation-policy") == "salaries-for-finance"
    await shots.take(page, "claims-denied")
    await simulated('["finance"]')
    assert "The claims are a JSON object." in await page.inner_text("#simulate-form .errorlist")

    for mode in ("legacy", "auto"):  # anonymous: not a member, and no claims
        async with mcp_client(server.mcp_url(slug), mode=mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]


async def test_an_owner_caps_a_tool_with_a_quota_and_a_client_is_told_past_it(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    """Quotas (AMB-352): a quota naming no tool of the tenant is refused on its field; once saved, a
    client's call past it answers `isError` naming it."""
    shots = Screenshots(request.node.name)
    slug = f"capped-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=t, name='search', handler='template', handler_config={'text': 'found'})\n",
    )
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/quota/add/")
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_name", "one-search-a-day")
    await page.fill("#id_tool", "serach")
    await page.fill("#id_calls", "1")
    await page.select_option("#id_window", "day")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    assert "no tool named 'serach'" in await page.inner_text(".field-tool .errorlist")
    await shots.take(page, "tool-refused")
    await page.fill("#id_tool", "search")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "Published one-search-a-day as version 1" in await body_text(page)
    await shots.take(page, "saved")

    async with mcp_client(server.mcp_url(slug), mode="auto") as client:
        assert not (await client.call_tool("search", {})).is_error
        past = await client.call_tool("search", {})
        assert past.is_error and "Quota one-search-a-day reached" in past.content[0].text


async def test_an_owner_adds_a_guardrail_and_a_client_gets_its_result_redacted(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    """Guardrails (AMB-354): a pattern RE2 cannot run is refused on its field, saying why; once saved,
    the simulator shows what it does to a sample result, and what a client's call returns comes back
    with each match replaced by the marker."""
    shots = Screenshots(request.node.name)
    slug = f"railed-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=t, name='ticket', handler='template', handler_config={'text': 'Opened {{ id }}'})\n",
    )
    await signed_in(page, server)
    await page.goto(f"{server.url}/admin/mcp_app/guardrail/add/")
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_name", "internal-ids")
    await page.select_option("#id_detector", "pattern")
    await page.fill("#id_pattern", "(?<=#)INT-[0-9]+")
    await page.select_option("#id_where", "results")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    assert "look-around" in await page.inner_text(".field-pattern .errorlist")
    await shots.take(page, "pattern-refused")
    await page.fill("#id_pattern", "INT-[0-9]{6}")
    async with page.expect_navigation():
        await page.click("input[name=_publish]")
    assert "Published internal-ids as version 1" in await body_text(page)
    await shots.take(page, "saved")

    await page.goto(f"{server.url}/admin/mcp_app/policy/simulate/")
    await page.select_option("#id_tenant", label=slug)
    await page.select_option("#id_kind", "tool")
    await page.fill("#id_name", "ticket")
    await page.fill("#id_sample", "Opened INT-654321")
    async with page.expect_navigation():
        await page.click("#simulate")
    guarded = await page.inner_text("#simulation-guardrails-result")
    assert "Opened [redacted match of internal-ids]" in guarded and "internal-ids found" in guarded
    await shots.take(page, "simulated")

    for mode in ("legacy", "auto"):
        async with mcp_client(server.mcp_url(slug), mode=mode) as client:
            opened = await client.call_tool("ticket", {"id": "INT-123456"})
            assert opened.content[0].text == "Opened [redacted match of internal-ids]"
