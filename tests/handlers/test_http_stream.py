"""The http kind following a streamed reply (newline-delimited JSON events) from a real local server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.core.errors import GoAsync, InputRequired, ProtocolError
from mcp_app.handlers import http_stream, registry
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.protocol import asking
from tests.handlers.support import QuietServer, Recorder, make_tool
from tests.support import fake_client, make_ctx

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASK_NAME = {"method": "elicitation/create", "params": {"message": "Your name?", "requestedSchema": FORM}}
RESULT = {"type": "result", "content": [{"type": "text", "text": "done"}], "structuredContent": {"n": 3}}


class Stream:
    """What a scenario writes on: one JSON event a line, sent at once."""

    def __init__(self, handler: BaseHTTPRequestHandler, server: Streamer) -> None:
        self.handler = handler
        self.server = server

    def raw(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def event(self, **event: Any) -> None:
        self.raw(json.dumps(event).encode() + b"\n")

    def reply(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next answer the platform POSTed to /reply."""
        return self.server.replies.get(timeout=timeout)

    def until_hung_up(self, every: float = 0.05, seconds: float = 10.0) -> None:
        """Keep sending (unknown events) until the platform closes the connection."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self.event(type="tick")
                time.sleep(every)
        except OSError:
            self.server.hung_up.set()


Scenario = Callable[[Stream], None]


@dataclass
class Streamer:
    """A local endpoint: POST /<name> plays the scenario registered as name; POST /reply takes answers."""

    base: str = ""
    content_type: str = "application/x-ndjson"
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    replies: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    hung_up: threading.Event = field(default_factory=threading.Event)

    def url(self, scenario: Scenario) -> str:
        self.scenarios[scenario.__name__] = scenario
        return f"{self.base}/{scenario.__name__}"


def streamer_handler(streamer: Streamer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            return None

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            streamer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            if self.path.startswith("/reply"):
                streamer.replies.put(json.loads(body))
                self.send_response(200 if self.path == "/reply" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", streamer.content_type)
            self.end_headers()  # HTTP/1.0 and no length: the body ends when the connection closes
            try:
                streamer.scenarios[self.path.lstrip("/")](Stream(self, streamer))
            except OSError:
                streamer.hung_up.set()

    return Handler


@pytest.fixture
def streamer() -> Iterator[Streamer]:
    streamer = Streamer()
    server = QuietServer(("127.0.0.1", 0), streamer_handler(streamer))
    streamer.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield streamer
    server.shutdown()
    server.server_close()


def stream_tool(url: str, **kwargs: Any):
    config = {"url": url, "timeout": kwargs.pop("timeout", 5)}
    return make_tool("http", config, timeout_seconds=kwargs.pop("timeout_seconds", 30), **kwargs)


def progress_of(recorder: Recorder) -> list[tuple[Any, ...]]:
    return [
        (m["params"]["progress"], m["params"].get("total"), m["params"].get("message"))
        for m in recorder.messages
        if m["method"] == "notifications/progress"
    ]


def logs_of(recorder: Recorder) -> list[tuple[str, Any]]:
    return [
        (m["params"]["level"], m["params"]["data"])
        for m in recorder.messages
        if m["method"] == "notifications/message"
    ]


def error_text(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    return result["content"][0]["text"]


@pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/jsonl; charset=utf-8"])
async def test_progress_and_log_events_reach_the_call_in_order_and_the_result_event_is_the_reply(
    ctx, recorder, streamer, allow_local, content_type
):
    streamer.content_type = content_type

    def count(stream: Stream) -> None:
        for i in (1, 2, 3):
            stream.event(type="progress", progress=i, total=3, message=f"step {i}")
            stream.event(type="log", level="info", data={"step": i}, logger="counter")
            time.sleep(0.02)
        stream.event(**RESULT)

    result = await registry.run_inline(ctx, stream_tool(streamer.url(count)), {"n": 3})
    assert result == {"content": [{"type": "text", "text": "done"}], "structuredContent": {"n": 3}}
    assert progress_of(recorder) == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert recorder.methods() == ["notifications/progress", "notifications/message"] * 3
    assert recorder.messages[1]["params"] == {"level": "info", "data": {"step": 1}, "logger": "counter"}
    assert json.loads(streamer.requests[0]["body"]) == {"n": 3}


async def test_the_request_says_it_takes_a_stream_and_names_the_call_the_same_in_every_round(
    ctx, streamer, allow_local
):
    def done(stream: Stream) -> None:
        stream.event(**RESULT)

    tool = stream_tool(streamer.url(done))
    for call_id in ("call-a", "call-a", "call-b"):
        await registry.run_inline(dataclasses.replace(ctx, call_id=call_id), tool, {})
    headers = [request["headers"] for request in streamer.requests]
    assert "application/x-ndjson" in headers[0]["Accept"]
    keys = [h["Idempotency-Key"] for h in headers]
    assert keys[0] == keys[1] != keys[2] and "call-a" not in keys[0]


async def test_log_events_below_the_requests_level_and_progress_without_a_token_are_not_sent(
    tenant_a, streamer, allow_local
):
    recorder = Recorder()
    ctx = make_ctx(tenant_a, "2025-06-18", emit=recorder, progress_token=None, log_level="warning")

    def chatty(stream: Stream) -> None:
        stream.event(type="progress", progress=1, total=2)
        stream.event(type="log", level="info", data="quiet")
        stream.event(type="log", level="error", data="loud")
        stream.event(type="result", value=1)

    result = await registry.run_inline(ctx, stream_tool(streamer.url(chatty)), {})
    assert result["structuredContent"] == {"value": 1}
    assert logs_of(recorder) == [("error", "loud")]
    assert progress_of(recorder) == []


async def test_a_progress_value_that_does_not_increase_is_dropped_and_unknown_events_are_ignored(
    ctx, recorder, streamer, allow_local
):
    def uneven(stream: Stream) -> None:
        stream.event(type="progress", progress=2)
        stream.event(type="heartbeat", at="now")
        stream.event(type="progress", progress=1)
        stream.event(type="progress", progress=2)
        stream.raw(b"\n  \r\n")  # blank lines count, but are not events
        stream.event(type="progress", progress=3.5)
        stream.event(type="result", content=[{"type": "text", "text": "ok"}], isError=True)

    result = await registry.run_inline(ctx, stream_tool(streamer.url(uneven)), {})
    assert result == {"content": [{"type": "text", "text": "ok"}], "isError": True}
    assert [value for value, _, _ in progress_of(recorder)] == [2, 3.5]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"{not json", "it is not JSON."),
        # AMB-115: a line past the one nesting limit was a RecursionError, an "internal error"
        # (8,000 deep: the tests cap a reply at 16 KiB).
        (b"[" * 8_000 + b"]" * 8_000, "it is nested deeper than 64 levels."),
        (
            b'{"type": "log", "level": "info", "data": ' + b"[" * 64 + b"]" * 64 + b"}",
            "it is nested deeper than 64",
        ),
        (b'["progress"]', 'it is not a JSON object with a string "type".'),
        (b'{"type": "progress", "progress": "half"}', 'a progress event needs a number "progress".'),
        (b'{"type": "log", "level": "loud", "data": 1}', '"level" must be one of debug, info'),
        (
            b'{"type": "ask", "id": 1, "request": {"method": "tools/call"}, "reply_url": "/reply"}',
            "the request's method must be elicitation/create, sampling/createMessage or roots/list.",
        ),
    ],
)
async def test_a_malformed_line_is_an_error_result_naming_its_line_number(
    ctx, streamer, allow_local, line, why
):
    def broken(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.raw(line + b"\n")
        stream.event(**RESULT)

    text = error_text(await registry.run_inline(ctx, stream_tool(streamer.url(broken)), {}))
    assert text.startswith(f"The endpoint's stream has a malformed line 2: {why}")


async def test_a_stream_that_ends_without_a_result_is_an_error_result(ctx, recorder, streamer, allow_local):
    def unfinished(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.raw(b'{"type": "progress", "progress": 2}')  # the last line may lack its newline

    text = error_text(await registry.run_inline(ctx, stream_tool(streamer.url(unfinished)), {}))
    assert text == "The endpoint ended its stream without a result."
    assert [value for value, _, _ in progress_of(recorder)] == [1, 2]


async def test_an_ask_event_asks_the_client_and_posts_the_answer_back_before_the_stream_goes_on(
    ctx, streamer, allow_local
):
    asked: list[dict[str, Any]] = []

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    def greet(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.event(type="ask", id="q-1", request=ASK_NAME, reply_url="/reply")
        answer = stream.reply()
        stream.event(type="result", greeting=f"Hello, {answer['result']['content']['name']}!")

    tool = dataclasses.replace(
        stream_tool(streamer.url(greet)), handler_secrets=encrypt_secrets({"Authorization": "Bearer k"})
    )
    result = await registry.run_inline(dataclasses.replace(ctx, ask=fake_client(client)), tool, {})
    assert result["structuredContent"] == {"greeting": "Hello, Ada!"}
    assert asked == [
        {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Your name?", "requestedSchema": FORM},
        }
    ]
    [_call, reply] = streamer.requests
    assert reply["path"] == "/reply" and reply["headers"]["Authorization"] == "Bearer k"
    assert json.loads(reply["body"]) == {
        "id": "q-1",
        "result": {"action": "accept", "content": {"name": "Ada"}},
    }


async def test_an_answer_outside_the_endpoints_choices_is_an_error_and_never_posted_back(
    ctx, streamer, allow_local
):
    """AMB-120: the client's answer is checked against the form the endpoint asked."""
    choice = {
        "type": "object",
        "properties": {"size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}]}},
    }
    question = {"method": "elicitation/create", "params": {"message": "Size?", "requestedSchema": choice}}

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"size": "Small"}}  # the title, not the value

    def ask(stream: Stream) -> None:
        stream.event(type="ask", id="size", request=question, reply_url="/reply")
        stream.until_hung_up()

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(ask)), {}
    )
    assert "do not fit" in error_text(result)
    assert len(streamer.requests) == 1  # nothing was posted back


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (
            {
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 5, "temperature": 0},
            },
            {
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 5, "temperature": 0},
            },
        ),
        ({"method": "roots/list"}, {"method": "roots/list", "params": {}}),
    ],
)
async def test_sampling_and_roots_can_be_asked_too(ctx, streamer, allow_local, request_, expected):
    asked: list[dict[str, Any]] = []

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"roots": []}

    def ask(stream: Stream) -> None:
        stream.event(type="ask", id=7, request=request_, reply_url=f"{streamer.base}/reply")
        stream.event(type="result", answer=stream.reply())

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(ask)), {}
    )
    assert result["structuredContent"] == {"answer": {"id": 7, "result": {"roots": []}}}
    assert asked == [expected]


@pytest.mark.parametrize(
    ("reply_url", "why"),
    [
        ("http://127.0.0.2:1/reply", '"reply_url" must be on the endpoint\'s own origin'),
        ("https://127.0.0.1/reply", '"reply_url" must be on the endpoint\'s own origin'),
        (None, 'an ask event needs a "reply_url".'),
    ],
)
async def test_an_ask_whose_reply_would_leave_the_endpoints_origin_is_refused_before_asking(
    ctx, streamer, allow_local, reply_url, why
):
    asked: list[dict[str, Any]] = []

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {}

    def ask(stream: Stream) -> None:
        stream.event(type="ask", id="q", request=ASK_NAME, reply_url=reply_url)

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(ask)), {}
    )
    assert error_text(result).startswith(f"The endpoint's stream has a malformed line 1: {why}")
    assert asked == [] and len(streamer.requests) == 1


async def test_an_answer_the_endpoint_refuses_is_an_error_result(ctx, streamer, allow_local):
    async def client(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "decline"}

    def ask(stream: Stream) -> None:
        stream.event(type="ask", id="q", request=ASK_NAME, reply_url="/reply/elsewhere")
        stream.until_hung_up()

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(ask)), {}
    )
    assert (
        error_text(result)
        == "The endpoint did not take the answer to its question: Upstream returned HTTP 404 Not Found."
    )


async def test_a_question_that_ends_the_round_closes_the_stream_and_reaches_the_caller(
    ctx, streamer, allow_local
):
    # 2026-07-28: the call returns the question, named by the event's id (AMB-122); its retry runs anew.
    modern = dataclasses.replace(
        ctx, protocol_version="2026-07-28", session=None, client_capabilities={"elicitation": {}}
    )

    def ask(stream: Stream) -> None:
        stream.event(type="ask", id="endpoint-7", request=ASK_NAME, reply_url="/reply")
        stream.until_hung_up()

    with pytest.raises(InputRequired) as asked:
        await registry.run_inline(
            dataclasses.replace(modern, ask=asking.Rounds().asker(modern)), stream_tool(streamer.url(ask)), {}
        )
    assert list(asked.value.requests) == ["endpoint-7"]
    assert asked.value.requests["endpoint-7"]["params"]["message"] == "Your name?"
    assert await asyncio.to_thread(streamer.hung_up.wait, 5)
    assert len(streamer.requests) == 1  # nothing was posted back


async def test_the_size_cap_applies_to_the_whole_stream(ctx, recorder, streamer, allow_local):
    def long(stream: Stream) -> None:
        for i in range(1, 1000):  # each line is small; together they pass the 16 KB cap
            stream.event(type="progress", progress=i, message="x" * 40)
        stream.event(**RESULT)

    text = error_text(await registry.run_inline(ctx, stream_tool(streamer.url(long)), {}))
    assert text == "The upstream reply is larger than 16384 bytes."
    assert len(progress_of(recorder)) < 999


async def test_a_cancelled_call_closes_the_stream(ctx, recorder, streamer, allow_local):
    cancelled = asyncio.Event()

    def endless(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.until_hung_up()

    call = asyncio.ensure_future(
        registry.run_inline(
            dataclasses.replace(ctx, cancelled=cancelled), stream_tool(streamer.url(endless)), {}
        )
    )
    while not progress_of(recorder):
        await asyncio.sleep(0.01)
    cancelled.set()
    result = await asyncio.wait_for(call, 5)
    assert error_text(result) == http_stream.CANCELLED
    assert await asyncio.to_thread(streamer.hung_up.wait, 5)


async def test_cancelling_the_handlers_task_closes_the_stream(ctx, recorder, streamer, allow_local):
    def endless(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.until_hung_up()

    call = asyncio.ensure_future(registry.run_inline(ctx, stream_tool(streamer.url(endless)), {}))
    while not progress_of(recorder):
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await asyncio.to_thread(streamer.hung_up.wait, 5)


async def test_a_stream_may_outlast_the_configured_timeout_but_not_its_silences_or_the_tools_timeout(
    ctx, streamer, allow_local
):
    def steady(stream: Stream) -> None:
        for i in range(1, 17):
            time.sleep(0.1)
            stream.event(type="progress", progress=i)
        stream.event(**RESULT)

    def stalls(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        time.sleep(2.5)
        stream.event(**RESULT)

    # 1.6 s of events under a 1.2 s timeout: each silence is shorter than it. (The margin is wide: under
    # a loaded CI machine's 0.4 s timeout, the first answer alone once took longer.)
    assert not (await registry.run_inline(ctx, stream_tool(streamer.url(steady), timeout=1.2), {})).get(
        "isError"
    )
    stalled = await registry.run_inline(ctx, stream_tool(streamer.url(stalls), timeout=1.2), {})
    assert error_text(stalled) == "The endpoint's stream sent nothing for 1.2 seconds."
    endless = await registry.run_inline(ctx, stream_tool(streamer.url(steady), timeout_seconds=0.5), {})
    assert error_text(endless) == "The tool did not finish within 0.5 seconds."


def test_validate_config_refuses_an_idempotency_key_header_the_platform_sets_itself():
    with pytest.raises(ValidationError, match="set by the platform"):
        registry.validate_config("http", {"url": "https://example.com/", "headers": {"Idempotency-Key": "x"}})


# --- Several questions on one line, a protocol error, the end of the questions (AMB-284..286) ---------

ASK_MODEL = {
    "method": "sampling/createMessage",
    "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 9},
}
ASK_ROOTS = {"method": "roots/list", "params": {}}
THREE = {"user_name": ASK_NAME, "greeting": ASK_MODEL, "client_roots": ASK_ROOTS}
ANSWERS = {
    "user_name": {"action": "accept", "content": {"name": "Alice"}},
    "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello!"}, "model": "m"},
    "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
}
EVERY_QUESTION = {"elicitation": {}, "sampling": {}, "roots": {}}


def asks_three(stream: Stream) -> None:
    stream.event(type="ask", requests=THREE, reply_url="/reply")
    if len(stream.server.requests) == 1 and stream.handler.headers.get("X-Round") == "1":
        stream.until_hung_up()  # the round ends here; the retry is another call
        return
    stream.event(type="result", answers=stream.reply())


async def test_several_questions_on_one_line_are_one_round_on_2026_07_28_and_their_answers_posted_together(
    ctx, streamer, allow_local
):
    modern = dataclasses.replace(
        ctx, protocol_version="2026-07-28", session=None, client_capabilities=EVERY_QUESTION
    )
    tool = stream_tool(streamer.url(asks_three))
    first = dataclasses.replace(tool, handler_config={**tool.handler_config, "headers": {"X-Round": "1"}})
    with pytest.raises(InputRequired) as asked:
        await registry.run_inline(dataclasses.replace(modern, ask=asking.Rounds().asker(modern)), first, {})
    assert {key: r["method"] for key, r in asked.value.requests.items()} == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    # The retry brings all three answers: the endpoint, called again, gets them in one post.
    answered = asking.Rounds(answers=dict(ANSWERS))
    result = await registry.run_inline(dataclasses.replace(modern, ask=answered.asker(modern)), tool, {})
    assert result.get("structuredContent") == {"answers": {"results": ANSWERS}}, result
    assert [r["path"] for r in streamer.requests] == ["/asks_three", "/asks_three", "/reply"]


async def test_several_questions_on_one_line_are_asked_one_by_one_on_a_legacy_session_and_posted_once(
    ctx, streamer, allow_local
):
    asked: list[str] = []

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["method"])
        return next(ANSWERS[key] for key, question in THREE.items() if question["method"] == request["method"])

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(asks_three)), {}
    )
    assert asked == ["elicitation/create", "sampling/createMessage", "roots/list"]
    assert result["structuredContent"] == {"answers": {"results": ANSWERS}}
    assert [r["path"] for r in streamer.requests] == ["/asks_three", "/reply"]


async def test_after_a_declined_form_the_questions_not_asked_have_no_answer_in_the_post(
    tenant_a, streamer, allow_local
):
    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:  # the legacy session's client: it declines the form
        if "id" in message and "method" in message:
            sent.append(message)
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}}
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, asking.deliver("sess-1", reply))

    ctx = make_ctx(tenant_a, "2025-11-25", client_capabilities=EVERY_QUESTION, emit=emit)
    ctx = dataclasses.replace(ctx, ask=asking.session_asker(ctx))
    result = await registry.run_inline(ctx, stream_tool(streamer.url(asks_three)), {})
    assert [m["method"] for m in sent] == ["elicitation/create"]
    assert result["structuredContent"] == {"answers": {"results": {"user_name": {"action": "decline"}}}}


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"id": "q", "request": ASK_NAME, "requests": THREE}, 'an ask event has either "id" and "request"'),
        ({"requests": {}}, '"requests" must be an object of 1 to 10 questions by key.'),
        ({"requests": [ASK_NAME]}, '"requests" must be an object of 1 to 10 questions by key.'),
        ({"requests": {f"k{i}": ASK_ROOTS for i in range(11)}}, '"requests" must be an object of 1 to 10'),
        ({"requests": {"": ASK_ROOTS}}, "a question's key must be 1 to 64 characters."),
        ({"requests": {"k" * 65: ASK_ROOTS}}, "a question's key must be 1 to 64 characters."),
        ({"requests": {"a": ASK_ROOTS, "b": {"method": "tools/call"}}}, "the request's method must be"),
        ({"requests": {"a": "roots/list"}}, '"request" must be an object with a "method"'),
    ],
)
async def test_a_malformed_line_of_several_questions_is_refused_before_anything_is_asked(
    ctx, streamer, allow_local, event, why
):
    asked: list[dict[str, Any]] = []

    async def client(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {}

    def ask(stream: Stream) -> None:
        stream.event(type="ask", reply_url="/reply", **event)

    result = await registry.run_inline(
        dataclasses.replace(ctx, ask=fake_client(client)), stream_tool(streamer.url(ask)), {}
    )
    assert error_text(result).startswith(f"The endpoint's stream has a malformed line 1: {why}")
    assert asked == []


async def test_an_error_event_is_the_calls_protocol_error_and_ends_the_stream(ctx, recorder, streamer, allow_local):
    def fails(stream: Stream) -> None:
        stream.event(type="progress", progress=1)
        stream.event(type="error", code=-32603, message="Broke.", data={"step": 1})
        stream.until_hung_up()

    with pytest.raises(ProtocolError) as failed:
        await registry.run_inline(ctx, stream_tool(streamer.url(fails)), {})
    assert failed.value.to_error() == {"code": -32603, "message": "Broke.", "data": {"step": 1}}
    assert progress_of(recorder) == [(1, None, None)]
    assert await asyncio.to_thread(streamer.hung_up.wait, 5)


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"message": "Broke."}, 'an error event needs an integer "code"'),
        ({"code": "-32603", "message": "Broke."}, 'an error event needs an integer "code"'),
        ({"code": True, "message": "Broke."}, 'an error event needs an integer "code"'),
        ({"code": 2**40, "message": "Broke."}, 'an error event needs an integer "code"'),
        ({"code": -32603}, 'an error event needs a string "message".'),
        ({"code": -32603, "message": ""}, 'an error event needs a string "message".'),
    ],
)
async def test_a_malformed_error_event_is_an_error_result_naming_its_line(ctx, streamer, allow_local, event, why):
    def fails(stream: Stream) -> None:
        stream.event(type="error", **event)

    result = await registry.run_inline(ctx, stream_tool(streamer.url(fails)), {})
    assert error_text(result).startswith(f"The endpoint's stream has a malformed line 1: {why}")


def asks_then_goes_on(stream: Stream) -> None:
    stream.event(type="ask", id="user_name", request=ASK_NAME, reply_url="/reply")
    answer = stream.reply()
    stream.event(type="task")
    stream.event(type="result", name=answer["result"]["content"]["name"])


async def test_a_task_event_ends_the_run_of_a_call_that_becomes_a_task_and_is_passed_over_elsewhere(
    ctx, streamer, allow_local
):
    modern = dataclasses.replace(
        ctx, protocol_version="2026-07-28", session=None, client_capabilities={"elicitation": {}}
    )
    answers = {"user_name": ANSWERS["user_name"]}
    tool = stream_tool(streamer.url(asks_then_goes_on))
    before_task = asking.Rounds(answers=dict(answers), before_task=True)
    with pytest.raises(GoAsync):
        await registry.run_inline(dataclasses.replace(modern, ask=before_task.asker(modern)), tool, {})
    plain = asking.Rounds(answers=dict(answers))
    result = await registry.run_inline(dataclasses.replace(modern, ask=plain.asker(modern)), tool, {})
    assert result["structuredContent"] == {"name": "Alice"}
