"""A tenant's quotas through the official SDK client on a real Daphne (AMB-352): past one the call is
`isError` naming it and the seconds left; the count is the caller's, whichever era it speaks and
however often it re-initializes; other tools are not counted."""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable
from contextlib import AsyncExitStack

import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.hostile_clients import CALLERS, attacking
from tests.e2e.isolation import isolated
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
ATTACK_SECONDS = 4.0  # the hostile clients' calls, once all four are calling
# Between a hostile client's calls: ~160 calls a second in all, past what the loop could serve were a
# throttled call to block it 10 ms, without the clients' own process taking a core from the server.
ATTACK_PAUSE = 0.02


def metered_tenant(server: DaphneServer) -> str:
    slug = f"metered-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Quota, Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "for name in ('greet', 'wave'):\n"
        "    Tool.objects.create(tenant=t, name=name, handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n"
        "q = Quota(tenant=t, name='three-an-hour', tool='greet', calls=3, window='hour'); q.full_clean(); q.save()\n",
    )
    return slug


async def test_a_callers_quota_holds_across_both_eras_and_every_new_session(server: DaphneServer) -> None:
    slug = metered_tenant(server)
    async with mcp_client(server.mcp_url(slug), mode="legacy") as client:
        for _ in range(2):
            assert not (await client.call_tool("greet", {"name": "Ada"})).is_error
    async with mcp_client(server.mcp_url(slug), mode="auto") as client:
        assert not (await client.call_tool("greet", {"name": "Ada"})).is_error
        past = await client.call_tool("greet", {"name": "Ada"})
        assert past.is_error
        text = past.content[0].text
        assert re.fullmatch(
            r"Quota three-an-hour reached: at most 3 calls per hour of the tool greet for you\. "
            r"Retry in \d+(\.\d+)? s\.",
            text,
        ), text
        assert not (await client.call_tool("wave", {"name": "Ada"})).is_error  # not counted
    # A new legacy session of the same caller (this address) is the same caller.
    async with mcp_client(server.mcp_url(slug), mode="legacy") as client:
        again = await client.call_tool("greet", {"name": "Ada"})
        assert again.is_error and "three-an-hour" in again.content[0].text


async def test_a_tenant_whose_clients_keep_calling_past_its_quota_slows_no_other_tenant(
    server: DaphneServer,
) -> None:
    """Four clients of one tenant call 20 ms apart long past a quota of three an hour: every call past
    the third is throttled (each a governance event) or, past 1,200 a minute, refused by its session's
    rate limit, and another tenant's p99 keeps within RATIO of its idle one (tests/e2e/isolation.py)."""
    hostile, other = metered_tenant(server), f"quiet-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"o = Tenant.objects.create(slug={other!r}, name={other!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=o, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n",
    )
    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[float, str]]], None]:
        return attacking(server.mcp_url(hostile), "greet", {"name": "x"}, ATTACK_SECONDS, ATTACK_PAUSE), None

    ended = await isolated(server.mcp_url(other), "four clients calling past a quota", prepare)
    # Past the quota every call is refused by it, or, past 1,200 a minute, by the session's own rate limit
    # (a measurement taken again finds the quota spent: no call then passes).
    texts = [text for _, text in ended]
    refused = [t for t in texts if t.startswith(("Quota three-an-hour reached", "Too many tool calls"))]
    assert texts.count("Hello, x!") <= 3 and len(refused) == len(texts) - texts.count("Hello, x!"), texts[:5]
    assert any(t.startswith("Quota three-an-hour reached") for t in refused) and len(texts) > 10 * CALLERS
