"""A tenant's quotas through the official SDK client on a real Daphne (AMB-352): past one the call is
`isError` naming it and the seconds left; the count is the caller's, whichever era it speaks and
however often it re-initializes; other tools are not counted."""

from __future__ import annotations

import re
import secrets

import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


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
