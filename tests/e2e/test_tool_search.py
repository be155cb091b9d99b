"""Search mode end to end (AMB-376, issue 36 §1): a tenant in search mode publishes a real SDK upstream's
tools, and the official SDK client, in legacy and auto modes, lists the three discovery tools, finds the
upstream's tool by words and by its upstream, and calls it through call_tool; `?tools=full` on the URL
gives that client the whole list."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def searching_tenant(server: DaphneServer, url: str) -> str:
    """A public tenant in search mode publishing every tool its upstream offers as docs_*, and 45 of its
    own (past the point where `auto` would search too)."""
    slug = f"search-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public', tool_discovery='search')\n"
        "for n in range(45):\n"
        "    Tool.objects.create(tenant=tenant, name=f'native_{n:02d}', description='A reply of the house.',"
        " handler='template', handler_config={'text': 'house'})\n"
        f"up = Upstream(tenant=tenant, name='docs', url={url!r}, prefix='docs_', timeout_seconds=10)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='echo'))\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='add'))\n",
    )
    return slug


def body(result) -> dict:  # noqa: ANN001
    assert not result.is_error, result
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_finds_an_upstream_tool_by_search_and_calls_it(
    server: DaphneServer, tmp_path: Path, mode: str
) -> None:
    with running_upstream(tmp_path, stateless=mode == "auto") as remote:
        slug = await asyncio.to_thread(searching_tenant, server, remote.url)
        url = server.mcp_url(slug)
        async with mcp_client(url, mode=mode) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["browse_tools", "call_tool", "search_tools"]
            found = body(await client.call_tool("search_tools", {"query": "echo the message"}))["tools"]
            assert found[0]["name"] == "docs_echo" and "message" in found[0]["inputSchema"]["properties"]
            # A shortened word, and the exact name first.
            assert (
                body(await client.call_tool("search_tools", {"query": "ech"}))["tools"][0]["name"]
                == "docs_echo"
            )
            assert (
                body(await client.call_tool("search_tools", {"query": "docs_add"}))["tools"][0]["name"]
                == "docs_add"
            )
            # Browsing the upstream gives its tools only, in name order.
            page = body(await client.call_tool("browse_tools", {"upstream": "docs"}))
            assert [t["name"] for t in page["tools"]] == ["docs_add", "docs_echo"]
            everything = body(await client.call_tool("browse_tools", {}))
            assert everything["upstreams"] == [{"name": "docs", "tools": 2}] and "nextCursor" in everything
            called = await client.call_tool(
                "call_tool", {"name": "docs_echo", "arguments": {"message": "found"}}
            )
            assert not called.is_error and "found" in called.content[0].text
            summed = await client.call_tool("call_tool", {"name": "docs_add", "arguments": {"a": 2, "b": 3}})
            assert "5" in summed.content[0].text
        async with mcp_client(url + "?tools=full", mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"docs_echo", "docs_add", "native_00"} <= names and "search_tools" not in names
