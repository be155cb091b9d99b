"""OpenTelemetry traces in process (AMB-85): the ASGI middleware, the dispatch span, httpx's traceparent.

The SDK's InMemorySpanExporter collects what the real provider (infra/otel.make_provider: the URL
redaction, the sampler) records; the ASGI application is wrapped exactly as mcpsite/asgi.py wraps it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mcpsite.asgi
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.infra import otel, tracing
from mcp_app.models import Tool
from tests.transport import support
from tests.transport.support import Client

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET_ARGUMENT = "argument-value-never-traced"
SECRET_HEADER = "Bearer header-secret-never-traced"


class Collected:
    """The spans the provider exported so far (its batch processor flushed first)."""

    def __init__(self, provider, exporter: InMemorySpanExporter) -> None:
        self.provider, self.exporter = provider, exporter

    def get_finished_spans(self):
        self.provider.force_flush()
        return self.exporter.get_finished_spans()


@pytest.fixture
def spans(monkeypatch) -> Iterator[Collected]:
    """Tracing switched on for this test: the real provider exporting to memory, the ASGI app wrapped
    as mcpsite/asgi.py wraps it, httpx traced."""
    exporter = InMemorySpanExporter()
    provider = otel.make_provider("test", [exporter])
    monkeypatch.setattr(tracing, "active", otel.Tracing(provider))
    monkeypatch.setattr(support, "application", tracing.instrument_asgi(mcpsite.asgi.application))
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    yield Collected(provider, exporter)
    HTTPXClientInstrumentor().uninstrument()
    provider.shutdown()


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        Recorder.seen.append(dict(self.headers))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    Recorder.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/lookup"
    httpd.shutdown()
    httpd.server_close()


def by_name(exporter: Collected, name: str):
    found = [span for span in exporter.get_finished_spans() if span.name == name]
    assert found, [span.name for span in exporter.get_finished_spans()]
    return found[-1]


async def test_a_tools_call_runs_in_a_span_named_by_its_method_under_the_http_request_span(tools_a, spans):
    client = Client()
    await client.initialize()
    response = await client.request(
        "tools/call", {"name": "echo", "arguments": {"message": SECRET_ARGUMENT}}, id=7
    )
    assert response.status == 200

    dispatch = by_name(spans, "tools/call")
    assert dispatch.attributes["mcp.tenant"] == "tenant-a"
    assert dispatch.attributes["mcp.method.name"] == "tools/call"
    assert dispatch.attributes["gen_ai.tool.name"] == "echo"
    assert dispatch.attributes["jsonrpc.request.id"] == "7"
    assert dispatch.status.status_code is StatusCode.UNSET
    http = next(s for s in spans.get_finished_spans() if s.context.span_id == dispatch.parent.span_id)
    assert http.kind is SpanKind.SERVER and http.context.trace_id == dispatch.context.trace_id
    assert "initialize" in {span.name for span in spans.get_finished_spans()}
    assert SECRET_ARGUMENT not in everything_recorded(spans)


async def test_an_incoming_traceparent_is_honoured_and_a_json_rpc_error_marks_the_span(tools_a, spans):
    client = Client()
    await client.initialize()
    response = await client.request(
        "tools/call", {"name": "no-such-tool"}, headers={"traceparent": TRACEPARENT}
    )
    assert "error" in response.json()

    dispatch = by_name(spans, "tools/call")
    assert format(dispatch.context.trace_id, "032x") == TRACE_ID
    http = next(s for s in spans.get_finished_spans() if s.context.span_id == dispatch.parent.span_id)
    assert format(http.parent.span_id, "016x") == PARENT_ID
    assert http.parent.is_remote
    assert dispatch.status.status_code is StatusCode.ERROR
    assert dispatch.attributes["rpc.jsonrpc.error_code"] == response.json()["error"]["code"]


async def test_a_traceparent_in_meta_makes_the_call_a_span_of_the_clients_trace(tools_a, spans):
    """AMB-357: the MCP convention carries W3C trace context in `params._meta`; the dispatch span joins
    that trace, linked to the HTTP request's span; a malformed one is ignored."""
    client = Client()
    await client.initialize()
    meta_trace = "0af7651916cd43dd8448eb211c80319c"
    meta = {"traceparent": f"00-{meta_trace}-b7ad6b7169203331-01", "tracestate": "vendor=x"}
    response = await client.request("tools/call", {"name": "echo", "arguments": {"message": "m"}, "_meta": meta})
    assert response.status == 200
    dispatch = by_name(spans, "tools/call")
    assert format(dispatch.context.trace_id, "032x") == meta_trace
    assert format(dispatch.parent.span_id, "016x") == "b7ad6b7169203331" and dispatch.parent.is_remote
    [link] = dispatch.links  # to the HTTP request's span, which stays in the trace it started
    http = next(s for s in spans.get_finished_spans() if s.context.span_id == link.context.span_id)
    assert http.kind is SpanKind.SERVER and http.context.trace_id != dispatch.context.trace_id
    assert dispatch.attributes["mcp.session.id"]

    bad = {"traceparent": "00-not-a-trace-01" + "x" * 100}
    await client.request("tools/call", {"name": "echo", "arguments": {"message": "m"}, "_meta": bad})
    dispatch = by_name(spans, "tools/call")
    assert format(dispatch.context.trace_id, "032x") != meta_trace and not dispatch.links


@pytest.fixture
def lookup_tool(tenant_a, upstream, settings) -> None:
    """An http tool of tenant A: GET with its argument in the query, a secret Authorization header."""
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    Tool.objects.create(
        tenant=tenant_a,
        name="lookup",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        handler="http",
        handler_config={"url": upstream, "method": "GET"},
        handler_secrets=encrypt_secrets({"Authorization": SECRET_HEADER}),
    )


async def test_an_http_tool_sends_traceparent_of_the_callers_trace_and_no_value_is_recorded(
    lookup_tool, spans
):
    client = Client()
    await client.initialize()
    response = await client.request(
        "tools/call",
        {"name": "lookup", "arguments": {"q": SECRET_ARGUMENT}},
        headers={"traceparent": TRACEPARENT},
    )
    assert response.json()["result"].get("isError") is not True, response.json()

    outbound = next(s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT)
    dispatch = by_name(spans, "tools/call")
    assert outbound.parent.span_id == dispatch.context.span_id
    sent = Recorder.seen[-1]["traceparent"]
    assert sent.split("-")[1] == TRACE_ID
    assert sent.split("-")[2] == format(outbound.context.span_id, "016x")
    recorded = everything_recorded(spans)
    assert SECRET_ARGUMENT not in recorded and "header-secret" not in recorded


async def test_a_legacy_post_query_keeps_its_names_and_loses_its_values(tools_a, spans):
    await support.call("POST", "/t/tenant-a/messages?session_id=not-a-value-to-keep", b"{}", {})
    http = next(s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER)
    assert "session_id=REDACTED" in everything_recorded(spans)
    assert "not-a-value-to-keep" not in everything_recorded(spans), http.attributes


def everything_recorded(exporter: Collected) -> str:
    return json.dumps([json.loads(span.to_json()) for span in exporter.get_finished_spans()])


def test_tracing_is_off_unless_otel_traces_exporter_names_an_exporter():
    assert not tracing.requested({})
    assert not tracing.requested({"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing.requested({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"})
    assert tracing.requested({"OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing.requested({"OTEL_TRACES_EXPORTER": "console,otlp"})


def test_an_unknown_exporter_or_otlp_protocol_stops_the_process_with_the_variables_name():
    with pytest.raises(ImproperlyConfigured, match="OTEL_TRACES_EXPORTER"):
        otel.exporters({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ImproperlyConfigured, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        otel.exporters({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


def test_with_tracing_off_the_asgi_application_loads_nothing_of_the_sdk():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    probe = (
        "import sys, mcpsite.asgi\n"
        "print(sorted(m for m in sys.modules if m == 'mcp_app.infra.otel' or m.startswith("
        "('opentelemetry.instrumentation', 'opentelemetry.exporter', 'opentelemetry.sdk.trace'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_redaction_keeps_paths_of_requests_and_only_the_origin_of_outbound_calls():
    assert otel.redact_url("http://h/t/a/messages?session_id=x&y=", client=False) == (
        "http://h/t/a/messages?session_id=REDACTED&y=REDACTED"
    )
    assert otel.redact_url("https://u:p@api.example.com:8443/users/42?q=v", client=True) == (
        "https://api.example.com:8443/"
    )
    assert otel.redact_url("a=1&b=2", client=False) == "a=REDACTED&b=REDACTED"
