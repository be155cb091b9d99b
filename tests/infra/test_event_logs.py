"""Governance events as OpenTelemetry log records (AMB-358): off unless OTEL_LOGS_EXPORTER names an
exporter; when on, the usage flush that writes the events emits each as a record (its kind as the event
name, the tenant, rule, target, method, caller and detail as attributes), never an argument or a text
found; switching logs on does not switch traces on."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    ConsoleLogRecordExporter,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)

from mcp_app.governance import audit
from mcp_app.infra import otel, tracing
from mcp_app.models import GovernanceEvent
from mcp_app.usage import flush as usage_flush


def test_the_exporters_are_those_otel_logs_exporter_names() -> None:
    assert otel.log_exporters({}) == []
    assert otel.log_exporters({"OTEL_LOGS_EXPORTER": "none"}) == []
    both = otel.log_exporters({"OTEL_LOGS_EXPORTER": "otlp, console"})
    assert [type(e) for e in both] == [OTLPLogExporter, ConsoleLogRecordExporter]
    with pytest.raises(ImproperlyConfigured, match="OTEL_LOGS_EXPORTER: unknown exporter 'syslog'"):
        otel.log_exporters({"OTEL_LOGS_EXPORTER": "syslog"})
    with pytest.raises(ImproperlyConfigured, match="'grpc' is not supported"):
        otel.log_exporters({"OTEL_LOGS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc"})
    assert tracing.requested({"OTEL_LOGS_EXPORTER": "console"}, "OTEL_LOGS_EXPORTER")
    assert not tracing.requested({"OTEL_LOGS_EXPORTER": "none"}, "OTEL_LOGS_EXPORTER")
    assert not tracing.requested({"OTEL_LOGS_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, "OTEL_LOGS_EXPORTER")


def test_logs_alone_switch_on_the_event_export_and_not_tracing(monkeypatch) -> None:
    monkeypatch.setattr(tracing, "active", None)
    monkeypatch.setattr(tracing, "event_logs", None)
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "console")
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    tracing.configure("mcp-platform")
    assert isinstance(tracing.event_logs, otel.EventLogs) and tracing.active is None


@pytest.fixture
def exported(monkeypatch) -> InMemoryLogRecordExporter:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    monkeypatch.setattr(tracing, "event_logs", otel.EventLogs(provider))
    return exporter


@pytest.mark.django_db
def test_the_flush_emits_each_event_of_a_live_tenant_as_a_log_record(exported, tenant_a) -> None:
    at = time.time()
    events = [
        audit.Event(at, tenant_a.id, "redacted", "mail", "echo", "tools/call", "user:7",
                    {"found": "e-mail address", "count": 2, "in": "result"}),
        audit.Event(at, tenant_a.id, "denied", "", "drop_table", "tools/call", "address:192.0.2.9"),
        audit.Event(at, 999_999, "denied", "gone", "x", "tools/call", "user:1"),  # its tenant was deleted
    ]  # fmt: skip
    usage_flush.write_governance(events)
    records = [data.log_record for data in exported.get_finished_logs()]
    assert [r.event_name for r in records] == ["mcp.governance.redacted", "mcp.governance.denied"]
    first: Any = records[0]
    assert dict(first.attributes) == {
        "mcp.tenant.id": tenant_a.id, "mcp.governance.kind": "redacted", "mcp.governance.rule": "mail",
        "mcp.governance.target": "echo", "mcp.method.name": "tools/call", "mcp.governance.caller": "user:7",
        "mcp.governance.detail": json.dumps({"count": 2, "found": "e-mail address", "in": "result"}),
    }  # fmt: skip
    assert first.timestamp == int(at * 1e9)
    assert first.body == "redacted tools/call of 'echo' for user:7 (policy, guardrail or quota 'mail')"
    assert records[1].body == "denied tools/call of 'drop_table' for address:192.0.2.9 (no allow policy held)"


@pytest.mark.django_db
def test_with_the_export_off_the_flush_only_writes(monkeypatch, tenant_a) -> None:
    monkeypatch.setattr(tracing, "event_logs", None)
    usage_flush.write_governance([audit.Event(time.time(), tenant_a.id, "denied", "p", "x", "tools/call", "user:1")])
    assert GovernanceEvent.objects.filter(tenant=tenant_a, rule="p").count() == 1
