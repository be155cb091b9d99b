"""A legacy client whose connection drops mid-call resumes on the other Daphne and misses nothing.

2025-11-25 (and 2025-06-18) streams are resumable: a closed connection is not a cancellation (HT-19),
the run goes on, its events are stored, and GET with Last-Event-ID on any process replays what came
after, each event once, then the result (HT-34). Raw HTTP: the SDK reconnects by itself, which would
hide what is tested here.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import REQUEST_SECONDS, open_legacy_session, parse_sse
from tests.e2e.servers import DaphneServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="the second Daphne reads the first one's events from Redis"),
]

STEPS = 6


def events_of(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(event id, message) of every SSE message event with data."""
    found = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event_id = next((line[3:].strip() for line in block.split("\n") if line.startswith("id:")), None)
        messages = parse_sse(block + "\n\n")
        if messages:
            found.append((event_id, messages[0]))
    return found


def counting_call(
    request_id: int, steps: int, token: str, tool: str = "count_slowly", delay: float = 0.3
) -> dict[str, Any]:
    """A tools/call of the demo's `count_slowly` (or `tool`, its like): a step every `delay` s, with progress."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": {"n": steps, "delay": delay},
            "_meta": {"progressToken": token},
        },
    }


async def test_a_dropped_call_is_resumed_on_the_other_daphne_with_every_event_once(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, server.mcp_url())
        call = counting_call(7, STEPS, "t")
        seen: list[tuple[str | None, dict[str, Any]]] = []
        buffer = ""
        async with http.stream("POST", server.mcp_url(), headers=headers, json=call) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for chunk in response.aiter_text():
                buffer += chunk
                seen = [(i, m) for i, m in events_of(buffer) if m.get("method") == "notifications/progress"]
                if len(seen) >= 2:
                    break  # the client's connection drops here
        last_id = seen[-1][0]
        assert last_id
        resumed = await http.get(
            server_b.mcp_url(), headers={**headers, "Accept": "text/event-stream", "Last-Event-ID": last_id}
        )
    rest = events_of(resumed.text)
    progress = [
        m["params"]["progress"] for _, m in seen + rest if m.get("method") == "notifications/progress"
    ]
    assert progress == list(range(1, STEPS + 1)), progress  # each step once, none lost, none twice
    final = rest[-1][1]
    assert final["id"] == 7 and final["result"]["content"][0]["text"] == f"Counted to {STEPS}."
    assert len({event_id for event_id, _ in seen + rest}) == len(seen + rest)
    assert json.dumps(final)  # a JSON-RPC response, the stream's last message
