"""A tenant's cap on open streams, on a real Daphne with the official SDK client (AMB-87)."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.e2e.helpers import REQUEST_SECONDS, mcp_client, open_legacy_session
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def tenant_with_one_stream(env: dict[str, str]) -> str:
    """A tenant of this test only, capped at one open stream, with a tool that reports progress."""
    slug = f"streams-{secrets.token_hex(3)}"
    django_shell(
        env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public', max_streams=1)\n"
        "Tool.objects.create(tenant=tenant, name='count', handler='python',"
        " handler_config={'callable': 'count_slowly'})\n",
    )
    return slug


def refusals(server: DaphneServer) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=REQUEST_SECONDS).text
    line = next(
        (row for row in text.splitlines() if row.startswith('mcp_limit_refusals_total{limit="streams"}')),
        None,
    )
    return float(line.split()[-1]) if line else 0.0


async def test_the_stream_past_the_tenants_cap_is_refused_and_a_stream_opens_again_once_one_closes(
    server: DaphneServer,
) -> None:
    slug = tenant_with_one_stream(server.env)
    url = server.mcp_url(slug)
    refused_before = refusals(server)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        holder = await open_legacy_session(http, url)
        async with http.stream("GET", url, headers={**holder, "Accept": "text/event-stream"}) as held:
            assert held.status_code == 200  # the tenant's one stream
            other = await open_legacy_session(http, url)
            refused = await http.get(url, headers={**other, "Accept": "text/event-stream"})
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert error["code"] == -32000 and "limit of 1 open streams" in error["message"]
            assert error["data"] == {"retryAfter": 5, "limit": 1, "streams": "server"}
            async with mcp_client(url) as client:  # its own GET stream is refused too (it gives up)
                # A call that would stream is still answered, as JSON, without its progress; it
                # outlasts the SDK's two tries at its GET stream (a second apart).
                result = await client.call_tool(
                    "count", {"n": 3, "delay": 1.0}, progress_callback=on_progress
                )
                assert result.structured_content == {"count": 3} and progress == []
                await held.aclose()  # the held stream closes
                result = await client.call_tool("count", {"n": 3, "delay": 0}, progress_callback=on_progress)
                assert result.structured_content == {"count": 3}
                assert progress == [1, 2, 3]  # streamed again
    # Refused: the raw GET, the SDK's GETs and its first call's stream; each counted on this process.
    assert refusals(server) >= refused_before + 3
