"""A published upstream tool serves exactly its published definition (AMB-280), end to end: the official SDK
client, in legacy and auto modes, through our real Daphne, to the SDK's real server recording every
tools/call it receives (tests/upstreams/servers.py, `calls` in its stats).

An argument the published input schema does not declare (the upstream's `echo` gained `loud` and waits for
review, or never had it) and an argument the owner fixed are refused with -32602 naming them, and never
reach the upstream; once the owner accepts the change, `loud` is declared and goes through.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from tests.e2e.helpers import REQUEST_SECONDS, sdk_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")
INVALID_PARAMS = -32602


def shell(env: dict[str, str], code: str) -> str:
    prelude = (
        "from mcp_app.models import Tool, Upstream, UpstreamTool\n"
        "from mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
    )
    return django_shell(env, prelude + code)


def publishing_tenant(env: dict[str, str], url: str) -> str:
    """A tenant publishing the upstream's echo as ref_echo and slow_count with `delay` fixed."""
    slug = f"pinned-{secrets.token_hex(3)}"
    shell(
        env,
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='ref', url={url!r}, prefix='ref_', timeout_seconds=5)\n"
        "up.full_clean(); up.save()\n"
        "service.sync(up)\n"
        "rows = {r.remote_name: r for r in UpstreamTool.objects.filter(upstream=up)}\n"
        "service.publish(rows['echo'])\n"
        "service.publish(rows['slow_count'], fixed={'delay': 0.01})\n",
    )
    return slug


async def refused(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[int, str, Any]:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(tool, arguments)
    error = caught.value.error
    return error.code, error.message, error.data


def forwarded(remote: UpstreamServer, tool: str) -> list[dict[str, Any]]:
    """The arguments of every call of `tool` that reached the upstream."""
    return [call["arguments"] for call in remote.stats()["calls"] if call["name"] == tool]


@pytest.fixture
def remote(tmp_path: Path) -> Any:
    with running_upstream(tmp_path) as server:
        yield server


async def test_an_argument_the_published_definition_does_not_declare_never_reaches_the_upstream(
    server: DaphneServer, e2e_env: dict[str, str], remote: UpstreamServer
) -> None:
    slug = await asyncio.to_thread(publishing_tenant, e2e_env, remote.url)
    for mode in MODES:
        async with sdk_client(server.mcp_url(slug), mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools["ref_echo"].input_schema["properties"]) == {"message"}, mode
            loud = await refused(client, "ref_echo", {"message": "hi", "loud": True})
            hidden = await refused(client, "ref_slow_count", {"n": 1, "delay": 30})
            both = await refused(client, "ref_echo", {"message": "hi", "loud": True, "zz": 1})
            fine = await client.call_tool("ref_echo", {"message": "hi"})
        assert loud[0] == INVALID_PARAMS and "'loud'" in loud[1] and loud[2] == {"arguments": ["loud"]}, mode
        assert hidden[0] == INVALID_PARAMS and "'delay'" in hidden[1], mode  # the owner's fixed argument
        assert both[0] == INVALID_PARAMS and "'loud', 'zz'" in both[1], mode
        assert fine.content[0].text == "hi" and not fine.is_error, mode
    assert forwarded(remote, "echo") == [{"message": "hi"}] * 2
    assert forwarded(remote, "slow_count") == []


async def test_a_new_argument_waiting_for_review_is_refused_until_the_owner_accepts_it(
    server: DaphneServer, e2e_env: dict[str, str], remote: UpstreamServer
) -> None:
    slug = await asyncio.to_thread(publishing_tenant, e2e_env, remote.url)
    async with sdk_client(remote.url, "legacy") as upstream_client:  # the upstream's echo gains `loud`
        assert (await upstream_client.call_tool("reshape", {})).content[0].text == "reshaped"
    out = await asyncio.to_thread(
        shell, e2e_env, f"up = Upstream.objects.get(tenant__slug={slug!r})\nprint(service.sync(up).changed)\n"
    )
    assert out.strip().splitlines()[-1] == "['echo']"  # held for review
    for mode in MODES:
        async with sdk_client(server.mcp_url(slug), mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools["ref_echo"].input_schema["properties"]) == {"message"}, mode  # the pinned one
            code, message, _data = await refused(client, "ref_echo", {"message": "hi", "loud": True})
        assert code == INVALID_PARAMS and "'loud'" in message, mode
    assert all("loud" not in arguments for arguments in forwarded(remote, "echo"))

    await asyncio.to_thread(
        shell,
        e2e_env,
        f"service.accept(UpstreamTool.objects.get(upstream__tenant__slug={slug!r}, remote_name='echo'))\n",
    )
    for mode in MODES:
        async with sdk_client(server.mcp_url(slug), mode) as client:
            async with asyncio.timeout(REQUEST_SECONDS):  # every process learns of the accepted change
                while "loud" not in await properties_of(client, "ref_echo"):
                    await asyncio.sleep(0.2)
            shouted = await client.call_tool("ref_echo", {"message": "hi", "loud": True})
        assert shouted.content[0].text == "HI" and not shouted.is_error, mode
    assert forwarded(remote, "echo") == [{"message": "hi", "loud": True}] * 2


async def properties_of(client: Any, name: str) -> set[str]:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    return set(tools[name].input_schema.get("properties", {}))
