"""The demo stream endpoint the seeded stream_count tool posts to: a streamed reply of JSON events."""

from __future__ import annotations

import json
import time

import pytest
from django.test import AsyncClient

from mcp_app.demo import seed


async def test_the_stream_endpoint_sends_a_progress_and_a_log_event_per_step_then_the_result():
    response = await AsyncClient().post(
        "/demo/stream", data=json.dumps({"n": 3, "delay": 0.05}), content_type="application/json"
    )
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    arrived: list[tuple[float, dict]] = []
    async for chunk in response.streaming_content:
        arrived += [(time.monotonic(), json.loads(line)) for line in chunk.decode().splitlines()]
    events = [event for _, event in arrived]
    assert [e["type"] for e in events] == ["progress", "log"] * 3 + ["result"]
    assert [(e["progress"], e["total"]) for e in events if e["type"] == "progress"] == [
        (1, 3),
        (2, 3),
        (3, 3),
    ]
    assert events[-1] == {
        "type": "result",
        "content": [{"type": "text", "text": "Counted to 3."}],
        "structuredContent": {"count": 3},
    }
    # Made step by step, not all at the end.
    assert arrived[-1][0] - arrived[0][0] >= 0.08


@pytest.mark.parametrize(
    "body", [b"{not json", b"[]", b'{"n": 0}', b'{"n": 21}', b'{"n": 2.5}', b'{"delay": 2}', b'{"n": true}']
)
async def test_the_stream_endpoint_refuses_arguments_out_of_its_small_bounds(body):
    response = await AsyncClient().post("/demo/stream", data=body, content_type="application/json")
    assert response.status_code == 400 and "n" in json.loads(response.content)["error"]


def test_stream_count_is_seeded_as_a_background_http_tool_posting_to_this_platforms_stream(settings):
    settings.MCP_PUBLIC_URL = "https://mcp.example.com"
    [tool] = [t for t in seed.load(seed.DEMO_SLUG)["tools"] if t["name"] == "stream_count"]
    assert tool["handler"] == "http" and tool["execution"] == "background"
    assert tool["handler_config"]["url"] == "https://mcp.example.com/demo/stream"
