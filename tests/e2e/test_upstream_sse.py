"""An upstream on the 2024-11-05 HTTP+SSE transport end to end (AMB-186): a tenant publishes its tools,
and the official SDK client calls them through our real Daphne, in legacy and auto modes, with progress,
logs and the upstream's question reaching the client."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_types import ElicitResult

from tests.e2e.helpers import Reports, sdk_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")


@pytest.fixture(scope="module")
def sse_remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamServer]:
    with running_upstream(tmp_path_factory.mktemp("upstream"), sse=True) as server:
        yield server


def sse_tenant(env: dict[str, str], url: str) -> str:
    """A tenant publishing the HTTP+SSE upstream's echo, slow_count and ask_name as docs_*."""
    slug = f"sse-{secrets.token_hex(3)}"
    django_shell(
        env,
        "from mcp_app.models import Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='docs', url={url!r}, transport='sse', prefix='docs_', timeout_seconds=5)\n"
        "up.full_clean(); up.save()\n"
        "service.sync(up)\n"
        "rows = {r.remote_name: r for r in UpstreamTool.objects.filter(upstream=up)}\n"
        "for name in ('echo', 'slow_count', 'ask_name'):\n"
        "    service.publish(rows[name])\n",
    )
    return slug


def answering(asked: list[str]) -> Any:
    async def person(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    return person


async def test_tools_of_an_http_sse_upstream_are_called_through_daphne_in_both_modes(
    server: DaphneServer, e2e_env: dict[str, str], sse_remote: UpstreamServer
) -> None:
    slug = await asyncio.to_thread(sse_tenant, e2e_env, sse_remote.url)
    for mode in MODES:
        reports = Reports()
        asked: list[str] = []
        async with sdk_client(
            server.mcp_url(slug), mode, elicitation_callback=answering(asked), logging_callback=reports.on_log
        ) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            echoed = await client.call_tool("docs_echo", {"message": f"hi {mode}"})
            counted = await client.call_tool(
                "docs_slow_count", {"n": 3, "delay": 0.01}, progress_callback=reports.on_progress
            )
            greeted = await client.call_tool("docs_ask_name", {})
        assert tools == {"docs_echo", "docs_slow_count", "docs_ask_name"}, mode
        assert echoed.structured_content == {"echo": f"hi {mode}"}, mode
        assert counted.content[0].text == "counted to 3" and reports.progress == [1, 2, 3], mode
        if mode == "legacy":  # a 2026-07-28 request is sent log messages only when it asks for them
            assert "counted 3" in [log.data for log in reports.logs]
        assert greeted.content[0].text == "Hello, Ada!" and asked == ["Who are you?"], mode
