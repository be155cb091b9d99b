"""A tenant's cap on open streams, on a real Daphne with the official SDK client (AMB-87)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.e2e.helpers import REQUEST_SECONDS, mcp_client, open_legacy_session
from tests.e2e.servers import DaphneServer, counting_tenant

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


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
    slug = counting_tenant(server.env, "streams", max_streams=1)  # capped at one open stream
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
                await held.aclose()  # the held stream closes...
                # ...and its slot is free once the server has noticed (at once, or a moment later
                # on a busy machine): a call streams its progress again.
                deadline = asyncio.get_running_loop().time() + 10
                while True:
                    progress.clear()
                    result = await client.call_tool(
                        "count", {"n": 3, "delay": 0}, progress_callback=on_progress
                    )
                    assert result.structured_content == {"count": 3}
                    if progress or asyncio.get_running_loop().time() > deadline:
                        break
                    await asyncio.sleep(0.2)
                assert progress == [1, 2, 3]  # streamed again
    # Refused: the raw GET, the SDK's GETs and its first call's stream; each counted on this process.
    assert refusals(server) >= refused_before + 3
