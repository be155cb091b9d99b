"""One trace from a client's request to the upstream and the worker (AMB-85), on real processes.

A Daphne of its own (and, with Redis, a Celery worker of its own on its own queue) with
OTEL_TRACES_EXPORTER=console: each process writes its spans to its log, one JSON object a line. The
call carries a `traceparent`; every span of the call must belong to that trace, the `http` kind must
send a `traceparent` of it to the upstream, and a background tool's job on the worker must be a
descendant of the call's dispatch span.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import MCP_HEADERS, REQUEST_SECONDS, Upstream
from tests.e2e.servers import DaphneServer, ServerProcess, start_celery_worker, start_daphne

pytestmark = pytest.mark.e2e

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
SPAN_SECONDS = 15.0


@pytest.fixture(scope="module")
def traced_env(e2e_env: dict[str, str]) -> dict[str, str]:
    return {
        **e2e_env,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "MCP_BACKGROUND_QUEUE": f"mcp-traced-{secrets.token_hex(4)}",
    }


@pytest.fixture(scope="module")
def traced(traced_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    daphne = start_daphne("daphne-traced", traced_env, tmp_path_factory.mktemp("traced"))
    yield daphne
    daphne.stop()


@pytest.fixture(scope="module")
def traced_worker(
    traced: DaphneServer, traced_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    worker = start_celery_worker("celery-traced", traced_env, tmp_path_factory.mktemp("traced-worker"))
    yield worker
    worker.stop()


def spans_in(process: ServerProcess) -> list[dict[str, Any]]:
    """The spans a process's console exporter wrote to its log so far."""
    found = []
    for line in process.read_log().splitlines():
        start = line.find('{"name":')
        if start < 0:
            continue
        try:
            found.append(json.loads(line[start:]))
        except ValueError:
            continue
    return found


def wait_for_spans(process: ServerProcess, trace_id: str, wanted: set[str]) -> list[dict[str, Any]]:
    """The process's spans of `trace_id`, once every name in `wanted` is among them."""
    deadline = time.monotonic() + SPAN_SECONDS
    while True:
        spans = [s for s in spans_in(process) if s["context"]["trace_id"] == f"0x{trace_id}"]
        if wanted <= {s["name"] for s in spans}:
            return spans
        if time.monotonic() > deadline:
            names = sorted({s["name"] for s in spans})
            pytest.fail(
                f"{process.name} wrote no span {sorted(wanted - set(names))} of the trace; it wrote {names}"
            )
        time.sleep(0.1)


def call_tool(server: DaphneServer, name: str, arguments: dict[str, Any], traceparent: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": MODERN_META},
    }
    headers = {
        **MCP_HEADERS,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        "traceparent": traceparent,
    }
    response = httpx.post(server.mcp_url(), json=body, headers=headers, timeout=REQUEST_SECONDS)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        answers = [json.loads(d) for d in data if d]
        return next(a for a in answers if a.get("id") == 1)
    return response.json()


def new_traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def test_an_http_tool_call_is_one_trace_from_the_incoming_traceparent_to_the_upstream(
    traced: DaphneServer, upstream: Upstream
) -> None:
    trace_id, traceparent = new_traceparent()
    answer = call_tool(traced, "fetch_json", {"hello": "traced"}, traceparent)
    assert answer["result"].get("isError") is not True, answer

    sent = [r["headers"] for r in upstream.requests if trace_id in r["headers"].get("traceparent", "")]
    assert sent, "the upstream received no traceparent of the call's trace"
    spans = wait_for_spans(traced, trace_id, {"tools/call", "POST"})
    by_id = {s["context"]["span_id"]: s for s in spans}
    dispatch = next(s for s in spans if s["name"] == "tools/call")
    assert dispatch["attributes"]["gen_ai.tool.name"] == "fetch_json"
    assert dispatch["attributes"]["mcp.tenant"] == "demo"
    server = by_id[dispatch["parent_id"]]
    assert server["kind"] == "SpanKind.SERVER"
    outbound = next(s for s in spans if s["kind"] == "SpanKind.CLIENT" and s["name"] == "POST")
    assert sent[-1]["traceparent"].split("-")[2] == outbound["context"]["span_id"][2:]
    assert dispatch["context"]["span_id"] in ancestors(outbound, by_id)
    assert "traced" not in json.dumps(spans)  # the argument's value


@pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker")
def test_a_background_tools_job_on_the_worker_is_a_child_of_the_calls_trace(
    traced: DaphneServer, traced_worker: ServerProcess
) -> None:
    trace_id, traceparent = new_traceparent()
    answer = call_tool(traced, "count_in_background", {"n": 2, "delay": 0.05}, traceparent)
    assert answer["result"].get("isError") is not True, answer

    served = wait_for_spans(traced, trace_id, {"tools/call", "apply_async/mcp_app.run_tool_job"})
    worked = wait_for_spans(traced_worker, trace_id, {"run/mcp_app.run_tool_job"})
    by_id = {s["context"]["span_id"]: s for s in served + worked}
    dispatch = next(s for s in served if s["name"] == "tools/call")
    run = next(s for s in worked if s["name"] == "run/mcp_app.run_tool_job")
    assert dispatch["context"]["span_id"] in ancestors(run, by_id)
    assert {s["resource"]["attributes"]["service.name"] for s in worked} == {"mcp-platform-worker"}


def ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[str]:
    """The span ids above `span`, as far as the collected spans go."""
    found = []
    parent = span.get("parent_id")
    while parent:
        found.append(parent)
        parent = by_id[parent].get("parent_id") if parent in by_id else None
    return found
