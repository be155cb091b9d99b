"""Our platform as an upstream of itself: one tenant federates another tenant served by a second Daphne
process, and the official SDK client reaches the inner tenant's tools through the outer one.

The inner tenant's endpoint is ours, so our federation client meets our own server in both of its
eras: `mode="auto"` speaks 2026-07-28 to it (no session), `mode="legacy"` opens a 2025-11-25 session.
Each is driven by the SDK client in legacy and auto modes: a template tool's result, and a python tool's
progress relayed from the inner tenant through the outer one to the person's client.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.e2e.helpers import Reports, sdk_client
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")


def federated_tenants(server: DaphneServer, inner_url_of: str, upstream_mode: str) -> tuple[str, str]:
    """An inner tenant with `greet` and `count`, and an outer one publishing both as in_*."""
    inner, outer = f"inner-{secrets.token_hex(3)}", f"outer-{secrets.token_hex(3)}"
    url = inner_url_of.replace("INNER", inner)
    django_shell(
        server.env,
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"i = Tenant.objects.create(slug={inner!r}, name={inner!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=i, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'},"
        " input_schema={'type': 'object', 'properties': {'name': {'type': 'string'}}, 'required': ['name']})\n"
        "Tool.objects.create(tenant=i, name='count', handler='python', handler_config={'callable': 'count_slowly'})\n"
        f"o = Tenant.objects.create(slug={outer!r}, name={outer!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=o, name='inner', url={url!r}, prefix='in_', mode={upstream_mode!r}, timeout_seconds=15)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "for row in UpstreamTool.objects.filter(upstream=up):\n"
        "    service.publish(row)\n",
    )
    return inner, outer


@pytest.mark.parametrize("upstream_mode", ["auto", "legacy"])
async def test_a_tenant_federates_another_tenant_of_a_second_process_in_both_eras(
    server: DaphneServer, server_b: DaphneServer, upstream_mode: str
) -> None:
    _inner, outer = await asyncio.to_thread(
        federated_tenants, server, server_b.mcp_url("INNER"), upstream_mode
    )
    for mode in MODES:
        reports = Reports()
        async with sdk_client(server.mcp_url(outer), mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"in_greet", "in_count"}, (upstream_mode, mode)
            assert tools["in_greet"].input_schema["required"] == ["name"]
            greeted = await client.call_tool("in_greet", {"name": "Ada"})
            counted = await client.call_tool(
                "in_count", {"n": 3, "delay": 0.01}, progress_callback=reports.on_progress
            )
        assert greeted.content[0].text == "Hello, Ada!", (upstream_mode, mode)
        assert counted.content[0].text == "Counted to 3." and counted.structured_content == {"count": 3}
        assert reports.progress == [1, 2, 3], (upstream_mode, mode)
