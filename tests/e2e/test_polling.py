"""Polling through a real Daphne (AMB-128..131): a long call's stream is closed, the client resumes it.

A tenant with `stream_poll_seconds` closes a 2025-11-25 session's long answer after that long, with
`retry`; the official SDK client (legacy mode) waits, resumes with GET + Last-Event-ID and gets every
progress notification once and the result. Older sessions keep their stream open.
"""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest

from mcp_app.core.versions import V2025_11_25
from tests.e2e.helpers import REQUEST_SECONDS, Inbox, Reports, mcp_client, open_legacy_session
from tests.e2e.servers import DaphneServer, counting_tenant
from tests.e2e.test_resume import events_of

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

RETRY_MS = 300
STEPS = 6
DELAY = 0.5  # 3 s a call: several one-second polls
CLOSED = "closed for polling"


class Watch(Inbox):
    """An inbox that also records the client's resumes: GETs with Last-Event-ID, by HTTP status."""

    def __init__(self) -> None:
        super().__init__()
        self.resumes: list[int] = []

    async def on_response(self, response: httpx2.Response) -> None:
        await super().on_response(response)
        if response.request.method == "GET" and "last-event-id" in response.request.headers:
            self.resumes.append(response.status_code)


@pytest.mark.parametrize("poll_seconds", [1, 0], ids=["polling", "polling-off"])
async def test_the_sdk_client_gets_every_progress_once_and_the_result_of_a_polled_call(
    server: DaphneServer, poll_seconds: int
) -> None:
    # Two slots a session: its GET stream and one call's stream. A closed stream must give its slot
    # back, or the resume would be the third and refused.
    slug = counting_tenant(
        server.env,
        "poll",
        stream_poll_seconds=poll_seconds,
        stream_poll_retry_ms=RETRY_MS,
        max_streams_per_session=2,
    )
    log_offset = server.log_size()
    watch = Watch()
    async with mcp_client(server.mcp_url(slug), watch) as client:
        assert client.protocol_version == V2025_11_25  # the SDK's legacy mode: polling allowed
        await watch.wait_for_get_stream()
        for _ in range(2):  # the second call finds every slot of the first one given back
            reports = Reports()
            result = await client.call_tool(
                "count", {"n": STEPS, "delay": DELAY}, progress_callback=reports.on_progress
            )
            assert result.structured_content == {"count": STEPS}
            assert reports.progress == list(range(1, STEPS + 1))  # each once, none lost
    closes = server.read_log(log_offset).count(CLOSED)
    if poll_seconds:
        assert closes >= 2 and len(watch.resumes) >= 2, (closes, watch.resumes)
        assert set(watch.resumes) == {200}
    else:
        assert closes == 0 and watch.resumes == []  # unchanged: one stream a call


async def read_stream(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> str:
    async with http.stream(method, url, **kwargs) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return (await response.aread()).decode()


@pytest.mark.parametrize("version", [V2025_11_25, "2025-06-18"])
async def test_a_polling_tenant_closes_only_a_2025_11_25_stream_and_the_resumes_carry_it_to_its_end(
    server: DaphneServer, version: str
) -> None:
    slug = counting_tenant(server.env, "poll-raw", stream_poll_seconds=1, stream_poll_retry_ms=RETRY_MS)
    url = server.mcp_url(slug)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "count",
            "arguments": {"n": STEPS, "delay": DELAY},
            "_meta": {"progressToken": "t"},
        },
    }
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, url, version=version)
        first = await read_stream(http, "POST", url, headers=headers, json=call)
        bodies = [first]
        while not any("result" in m for _, m in events_of(bodies[-1])) and len(bodies) < 12:
            last_id = [i for body in bodies for i, _ in events_of(body) if i][-1]
            bodies.append(
                await read_stream(
                    http,
                    "GET",
                    url,
                    headers={**headers, "Accept": "text/event-stream", "Last-Event-ID": last_id},
                )
            )
    seen = [(i, m) for body in bodies for i, m in events_of(body)]
    progress = [m["params"]["progress"] for _, m in seen if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, STEPS + 1)), progress
    assert seen[-1][1]["id"] == 7 and seen[-1][1]["result"]["structuredContent"] == {"count": STEPS}
    assert len({i for i, _ in seen}) == len(seen)  # each event once
    if version == V2025_11_25:
        # The server ended the POST's connection before the response, telling the client when to come back.
        assert first.rstrip().endswith(f"retry: {RETRY_MS}"), first[-200:]
        assert f"retry: {RETRY_MS}" in first.split("\n\n")[0]  # the priming event says it first
        assert len(bodies) >= 3
    else:
        assert len(bodies) == 1 and "retry:" not in first  # 2025-06-18 cannot poll: one stream to the end
