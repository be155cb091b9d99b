"""A no-code long tool: an http tool on a real Celery worker whose endpoint streams JSON events.

`stream_count_self` is the seeded stream_count as bin/serve leaves it (posting to this platform's own
/demo/stream, through Daphne); `stream_ask` posts to an endpoint here that asks for a name and waits
for the answer on its reply URL. The official SDK client calls both, in both eras.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp_types import ElicitResult

from tests.e2e.helpers import REQUEST_SECONDS, sdk_client, wait_until, wait_until_served
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker"),
]

COUNT, ASK = "stream_count_self", "stream_ask"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class AskingEndpoint(ThreadingHTTPServer):
    """POST /ask streams a progress event and a question, waits for its answer, then the greeting."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), AskingHandler)
        self.calls: list[dict[str, str]] = []
        self.answers: dict[str, queue.Queue[dict[str, Any]]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/ask"


class AskingHandler(BaseHTTPRequestHandler):
    server: AskingEndpoint

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the test output clean
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/reply/"):
            self.server.answers[self.path.removeprefix("/reply/")].put(json.loads(body))
            self.send_response(204)
            self.end_headers()
            return
        call = str(len(self.server.calls))
        self.server.answers[call] = queue.Queue()
        self.server.calls.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        question = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": FORM}}
        try:
            self.event(type="progress", progress=1, total=2)
            self.event(type="ask", id="name", request=question, reply_url=f"/reply/{call}")
            # A 2026-07-28 round closes this stream instead: the retry is another call.
            answer = self.server.answers[call].get(timeout=REQUEST_SECONDS)
            self.event(type="progress", progress=2, total=2)
            self.event(type="result", greeting=f"Hello, {answer['result']['content']['name']}!")
        except (OSError, queue.Empty):
            return

    def event(self, **event: Any) -> None:
        self.wfile.write(json.dumps(event).encode() + b"\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def asking_endpoint() -> Iterator[AskingEndpoint]:
    endpoint = AskingEndpoint()
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    yield endpoint
    endpoint.shutdown()
    endpoint.server_close()


@pytest.fixture(scope="module")
def tools(
    server: DaphneServer, celery_worker: ServerProcess, asking_endpoint: AskingEndpoint
) -> Iterator[None]:
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='stream_count')\n"
        f"tool.pk, tool.name = None, {COUNT!r}\n"
        f"tool.handler_config = {{**tool.handler_config, 'url': {server.url + '/demo/stream'!r}}}\n"
        "tool.save()\n"
        f"tool.pk, tool.name = None, {ASK!r}\n"
        f"tool.handler_config = {{**tool.handler_config, 'url': {asking_endpoint.url!r}}}\n"
        "tool.input_schema = {'type': 'object'}\n"
        "tool.save()\n",
    )
    wait_until_served(server.mcp_url(), ASK)
    yield
    django_shell(
        server.env,
        f"from mcp_app.models import Tool\nTool.objects.filter(name__in={[COUNT, ASK]!r}).delete()\n",
    )


def finished(worker: ServerProcess, tool: str) -> int:
    pattern = re.compile(rf"job \S+ \(tool {tool}\) finished")
    return sum(1 for line in worker.read_log().splitlines() if pattern.search(line))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_workers_http_tool_relays_its_endpoints_progress_events_to_the_sdk_then_the_result(
    server: DaphneServer, celery_worker: ServerProcess, tools: None, mode: str
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    before = finished(celery_worker, COUNT)
    async with sdk_client(
        server.mcp_url(),
        mode,
    ) as client:
        result = await client.call_tool(COUNT, {"n": 3, "delay": 0.05}, progress_callback=on_progress)
    assert not result.is_error, result
    assert result.structured_content == {"count": 3}
    assert progress == [(i, 3, f"Counted {i} of 3") for i in (1, 2, 3)]
    await wait_until(lambda: finished(celery_worker, COUNT) == before + 1, "the worker's log line")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_endpoints_question_is_asked_through_the_worker_and_the_answer_posted_back(
    server: DaphneServer,
    celery_worker: ServerProcess,
    tools: None,
    asking_endpoint: AskingEndpoint,
    mode: str,
) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    calls = len(asking_endpoint.calls)
    async with sdk_client(
        server.mcp_url(),
        mode,
        elicitation_callback=on_elicit,
    ) as client:
        result = await client.call_tool(ASK, {})
    assert not result.is_error, result
    assert result.structured_content == {"greeting": "Hello, Ada!"}
    assert asked == ["Name?"]
    # legacy: one stream, answered on it; 2026-07-28: the question ended the first round, and the
    # retry called the endpoint again, as the same call.
    made = asking_endpoint.calls[calls:]
    assert len(made) == (2 if mode == "auto" else 1)
    assert len({headers["Idempotency-Key"] for headers in made}) == 1
