"""The OpenTelemetry SDK, its exporters and the instrumentations: loaded only when tracing is on.

infra/tracing.py imports this module when OTEL_TRACES_EXPORTER names an exporter (AMB-85). What is
traced: every HTTP request (the ASGI middleware, which also honours an incoming `traceparent`), one
span per JSON-RPC request (transport/runner.py, through `Tracing.request_span`), PostgreSQL queries
(psycopg), Redis commands (their arguments never recorded), outbound HTTP (httpx, which sends
`traceparent` on) and Celery jobs (the context travels in the task's headers).

No value a client sent ends up in a span: URL query values are replaced, outbound URLs keep only
their origin (the `http` kind may put arguments in the path or the query), the dispatch span names
the method and the tool and never the arguments, and exceptions are not recorded (a message may
quote a value). Spans outside any request or job (the channel layer's and the workers' polling of
Redis, the usage flush) start no trace unless OTEL_TRACES_SAMPLER says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mcp_app.infra.redaction import redact_query

EXPORTERS = ("otlp", "console", "none")
# Attributes holding a URL or its query, old and stable HTTP semantic conventions alike.
URL_ATTRIBUTES = ("http.url", "url.full", "http.target", "url.query")
# Probes and scrapes are called every second or so: not worth a trace unless the operator says so.
DEFAULT_EXCLUDED_URLS = "/health/,/metrics"
# A client chooses its request ids and tool names: an attribute keeps this much of them.
MAX_NAME = 128


def _names(environ: Mapping[str, str], variable: str, signal: str) -> list[str]:
    """The exporters `variable` names (comma-separated): otlp (HTTP/protobuf), console, none."""
    names = [name.strip().lower() for name in environ.get(variable, "").split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise ImproperlyConfigured(f"{variable}: unknown exporter {unknown[0]!r}; use otlp, console or none.")
    protocol = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if "otlp" in names and protocol not in (None, "", "http/protobuf"):
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported; use http/protobuf."
        )
    return names


def exporters(environ: Mapping[str, str] = os.environ) -> list[SpanExporter]:
    """The span exporters OTEL_TRACES_EXPORTER names."""
    names = _names(environ, "OTEL_TRACES_EXPORTER", "TRACES")
    result: list[SpanExporter] = []
    if "otlp" in names:
        # Reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT itself.
        result.append(OTLPSpanExporter())
    if "console" in names:
        # One JSON object a line, so a process log stays greppable.
        result.append(ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n"))
    return result


def log_exporters(environ: Mapping[str, str] = os.environ) -> list[LogRecordExporter]:
    """The log record exporters OTEL_LOGS_EXPORTER names (governance events, AMB-358)."""
    names = _names(environ, "OTEL_LOGS_EXPORTER", "LOGS")
    result: list[LogRecordExporter] = []
    if "otlp" in names:
        result.append(OTLPLogExporter())  # OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT, _HEADERS, _TIMEOUT
    if "console" in names:
        result.append(ConsoleLogRecordExporter(formatter=lambda record: record.to_json(indent=None) + "\n"))
    return result


class EventLogs:
    """Governance events as OpenTelemetry log records, one a record, batched by the SDK's processor
    (OTEL_BLRP_*: a full queue drops, it never blocks the flush that emits)."""

    def __init__(self, provider: LoggerProvider) -> None:
        self.provider = provider
        self.logger = provider.get_logger("mcp.governance")

    def emit(self, events: Iterable[tuple[float, str, str, dict[str, Any]]]) -> None:
        for at, name, body, attributes in events:
            self.logger.emit(
                timestamp=int(at * 1e9), severity_number=SeverityNumber.INFO, severity_text="INFO",
                body=body, attributes=attributes, event_name=name,
            )  # fmt: skip


def configure_logs(service: str, log_record_exporters: list[LogRecordExporter]) -> EventLogs:
    provider = LoggerProvider(resource=_resource(service))
    for exporter in log_record_exporters:
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    return EventLogs(provider)


class RequestsOnly(Sampler):
    """Start a trace for a request or a job, not for a client call made outside of one.

    A root span of kind CLIENT is a Redis poll of the channel layer or a Celery worker, a database
    query of the usage flush: thousands of one-span traces an hour that say nothing.
    """

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if kind is SpanKind.CLIENT:
            return SamplingResult(Decision.DROP)
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "RequestsOnly"


def redact_url(value: str, client: bool) -> str:
    """A URL (or query) without the values it carries: query values replaced, and for an outbound
    call only its origin (the http kind may put arguments in the path)."""
    if "://" not in value and not value.startswith("/"):  # a bare query (url.query)
        return redact_query(value)
    parts = urlsplit(value)
    if client:
        return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], "/", "", ""))
    return urlunsplit(
        (parts.scheme, parts.netloc.rpartition("@")[2], parts.path, redact_query(parts.query), "")
    )


def redacted(span: ReadableSpan) -> ReadableSpan:
    """The span with its URL attributes redacted (redact_url); the span itself when there is nothing to do."""
    attributes = span.attributes or {}
    client = span.kind is SpanKind.CLIENT
    changes = {
        key: redact_url(value, client)
        for key in URL_ATTRIBUTES
        if isinstance(value := attributes.get(key), str) and value
    }
    if all(attributes[key] == value for key, value in changes.items()):
        return span
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes={**attributes, **changes},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class Redacting(SpanExporter):
    """Hands an exporter spans without URL values. At export time, because instrumentations set
    attributes after a span has started (the ASGI middleware sets them all again)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([redacted(span) for span in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _resource(service: str) -> Resource:
    """OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES' service.name, else `service`."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    return resource


def make_provider(service: str, span_exporters: list[SpanExporter]) -> TracerProvider:
    """A TracerProvider with a batch processor per exporter, each behind the URL redaction."""
    resource = _resource(service)
    # The SDK reads OTEL_TRACES_SAMPLER itself when it is set; otherwise no root client spans.
    sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else ParentBased(root=RequestsOnly())
    provider = TracerProvider(resource=resource, sampler=sampler)
    for exporter in span_exporters:
        # OTEL_BSP_* (delay, queue and batch sizes) are read by the processor.
        provider.add_span_processor(BatchSpanProcessor(Redacting(exporter)))
    return provider


class Tracing:
    """Tracing switched on: the dispatch span of transport/runner.py and the ASGI middleware."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("mcp_app")

    @contextlib.contextmanager
    def request_span(
        self,
        tenant: str,
        method: str,
        tool: str | None,
        request_id: Any,
        protocol_version: str | None,
        meta: Any = None,
        session_id: str | None = None,
    ) -> Iterator[trace.Span]:
        """The span of one JSON-RPC message, current while it is dispatched (children: the handler's
        calls). Its name is the method (bounded by the caller); arguments are never attributes. A
        `traceparent` (and `tracestate`) in the message's `_meta` makes it a span of the client's trace
        (the MCP convention for trace context), linked to the HTTP request's span it would have had."""
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "mcp.tenant": tenant,
            "mcp.method.name": method,
        }
        if session_id:
            attributes["mcp.session.id"] = session_id[:MAX_NAME]
        parent, links = _meta_context(meta)
        if tool:
            attributes["gen_ai.tool.name"] = tool[:MAX_NAME]
        if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
            attributes["jsonrpc.request.id"] = str(request_id)[:MAX_NAME]
        if protocol_version:
            attributes["mcp.protocol.version"] = protocol_version
        with self.tracer.start_as_current_span(
            method, context=parent, links=links, attributes=attributes, record_exception=False,
            set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                yield span
            except asyncio.CancelledError:
                span.set_attribute("error.type", "cancelled")
                raise
            except BaseException as exc:
                # The type only: a message may quote an argument.
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(StatusCode.ERROR)
                raise

    @staticmethod
    def note_response(span: trace.Span, response: dict[str, Any] | None) -> None:
        """A JSON-RPC error or a tool's isError result marks the span as failed (code, not message)."""
        if response is None:
            return
        error = response.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            if isinstance(code, int):
                span.set_attribute("rpc.jsonrpc.error_code", code)
            span.set_attribute("error.type", str(code))
            span.set_status(StatusCode.ERROR)
            return
        result = response.get("result")
        if isinstance(result, dict) and result.get("isError") is True:
            span.set_attribute("error.type", "tool_error")
            span.set_status(StatusCode.ERROR)

    def wrap_asgi(self, app: Any) -> Any:
        """The ASGI middleware: a server span per HTTP request, `traceparent` honoured. No span per
        receive or send: an SSE stream would make one per event."""
        excluded = None
        if not (
            os.environ.get("OTEL_PYTHON_ASGI_EXCLUDED_URLS") or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
        ):
            excluded = DEFAULT_EXCLUDED_URLS
        return OpenTelemetryMiddleware(
            app, excluded_urls=excluded, tracer_provider=self.provider, exclude_spans=["receive", "send"]
        )


_PROPAGATOR = TraceContextTextMapPropagator()
# W3C trace context: a traceparent is 55 characters; a tracestate at most 32 members (512 is plenty).
MAX_TRACEPARENT, MAX_TRACESTATE = 55, 512


def _meta_context(meta: Any) -> tuple[otel_context.Context | None, list[trace.Link]]:
    """The client's trace context from a message's `_meta`, if it carries a valid one, and a link to
    the span that would otherwise have been the parent (the HTTP request's)."""
    if not isinstance(meta, dict):
        return None, []
    traceparent, tracestate = meta.get("traceparent"), meta.get("tracestate")
    if not isinstance(traceparent, str) or len(traceparent) > MAX_TRACEPARENT:
        return None, []
    carrier = {"traceparent": traceparent}
    if isinstance(tracestate, str) and len(tracestate) <= MAX_TRACESTATE:
        carrier["tracestate"] = tracestate
    extracted = _PROPAGATOR.extract(carrier)
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None, []  # malformed: the span stays where the HTTP request put it
    current = trace.get_current_span().get_span_context()
    return extracted, [trace.Link(current)] if current.is_valid else []


def instrument(provider: TracerProvider) -> None:
    """The official instrumentations, on this provider. Redis's records commands without arguments."""
    PsycopgInstrumentor().instrument(tracer_provider=provider)
    RedisInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)


def configure(service: str) -> Tracing:
    """Set up the SDK from the OTEL_* variables for this process and instrument the libraries."""
    provider = make_provider(service, exporters())
    trace.set_tracer_provider(provider)
    instrument(provider)
    return Tracing(provider)
