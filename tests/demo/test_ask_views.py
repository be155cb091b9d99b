"""The demo's streaming endpoints that ask, fail, and go on as a task (mcp_app/demo/ask_views.py), read as
the platform reads them; the tools that post to them are called through Daphne in
tests/e2e/test_conformance_tools.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.test import AsyncClient

from mcp_app.demo import ask_views


async def events(content: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    async for chunk in content:
        for line in chunk.decode().splitlines():
            yield json.loads(line)


async def test_ask_together_asks_three_questions_on_one_line_and_answers_with_what_it_was_posted():
    client = AsyncClient()
    response = await client.post("/demo/ask-together", data=b"{}", content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    stream = events(response.streaming_content)
    ask = await anext(stream)
    assert {key: r["method"] for key, r in ask["requests"].items()} == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    results = {
        "user_name": {"action": "accept", "content": {"name": "Ada"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi!"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///p", "name": "p"}]},
    }
    posted = await client.post(
        ask["reply_url"], data=json.dumps({"results": results}), content_type="application/json"
    )
    assert posted.status_code == 204
    result = await anext(stream)
    assert result["structuredContent"] == {"name": "Ada", "greeting": "Hi!", "roots": ["file:///p"]}
    assert not ask_views._waiting  # nothing left waiting
    # The reply URL is used once.
    again = await client.post(ask["reply_url"], data=b"{}", content_type="application/json")
    assert again.status_code == 404


async def test_ask_then_task_says_task_once_its_question_is_answered_then_works_and_greets():
    client = AsyncClient()
    response = await client.post("/demo/ask-then-task", data=b"{}", content_type="application/json")
    stream = events(response.streaming_content)
    ask = await anext(stream)
    assert ask["id"] == "user_name" and ask["request"]["method"] == "elicitation/create"
    answer = {"id": "user_name", "result": {"action": "accept", "content": {"name": "Ada"}}}
    await client.post(ask["reply_url"], data=json.dumps(answer), content_type="application/json")
    rest = [event async for event in stream]
    assert [e["type"] for e in rest] == ["task", "progress", "progress", "progress", "result"]
    assert rest[-1]["content"][0]["text"] == "Hello, Ada! This greeting took 3 steps."


async def test_fail_streams_a_progress_then_a_protocol_error():
    response = await AsyncClient().post("/demo/fail", data=b"{}", content_type="application/json")
    lines = [event async for event in events(response.streaming_content)]
    assert [e["type"] for e in lines] == ["progress", "error"]
    assert lines[1]["code"] == -32603 and lines[1]["message"] == ask_views.FAILURE


@pytest.mark.parametrize("body", [b"not json", b"[1]"])
async def test_a_reply_that_is_not_a_json_object_is_refused_and_the_question_still_waits(body):
    client = AsyncClient()
    response = await client.post("/demo/ask-together", data=b"{}", content_type="application/json")
    stream = events(response.streaming_content)
    ask = await anext(stream)
    refused = await client.post(ask["reply_url"], data=body, content_type="application/json")
    assert refused.status_code == 400
    assert len(ask_views._waiting) == 1
    declined = {"results": {"user_name": {"action": "decline"}}}
    taken = await client.post(ask["reply_url"], data=json.dumps(declined), content_type="application/json")
    assert taken.status_code == 204
    [result] = [event async for event in stream]
    assert result["content"][0]["text"] == "You did not give your name, so nothing else was asked."


async def test_unknown_reply_urls_are_404_and_the_endpoints_take_posts_only():
    client = AsyncClient()
    assert (
        await client.post("/demo/reply/nobody", data=b"{}", content_type="application/json")
    ).status_code == 404
    for path in ("/demo/ask-together", "/demo/ask-then-task", "/demo/fail", "/demo/reply/x"):
        assert (await client.get(path)).status_code == 405


async def test_past_its_cap_of_waiting_questions_the_endpoint_answers_503(monkeypatch):
    monkeypatch.setattr(ask_views, "MAX_WAITING", 0)
    response = await AsyncClient().post("/demo/ask-together", data=b"{}", content_type="application/json")
    assert response.status_code == 503
