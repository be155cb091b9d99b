"""Prometheus metrics (mcp_app/operations/metrics.py): counted off the hot path, labels bounded, access protected."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from mcp_app import federation
from mcp_app.background import presence
from mcp_app.federation import breaker, call_stats
from mcp_app.models import ToolRun
from mcp_app.protocol import quotas
from mcp_app.usage import recorder as usage
from tenants.models import Tenant
from tests.upstreams.running import call_row, kill_until_open, make_upstream, running_upstream

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_recorder(monkeypatch) -> usage.Recorder:
    fresh = usage.Recorder("test")
    monkeypatch.setattr(usage, "RECORDER", fresh)
    return fresh


def scrape(client: Client, **extra: Any) -> dict[str, list[Any]]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    families = text_string_to_metric_families(response.content.decode())
    return {family.name: family.samples for family in families}


def value(samples: list[Any], name: str, **labels: str) -> float:
    found = [
        s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, samples)
    return found[0]


def test_requests_and_tool_latency_are_reported_by_tenant_method_and_outcome(
    client, tenant_a, tenant_b, fresh_recorder
):
    for seconds, outcome in ((0.003, usage.OK), (0.2, usage.OK), (0.04, usage.TOOL_ERROR)):
        fresh_recorder.record(tenant_a.id, "tools/call", "echo", seconds, outcome)
    fresh_recorder.record(tenant_b.id, "tools/list", "", 0.001, usage.ERROR)
    fresh_recorder.take()  # one flush happened: flushed and pending counts both show
    fresh_recorder.record(tenant_a.id, "tools/call", "echo", 0.02, usage.OK)
    metrics = scrape(client)
    requests = metrics["mcp_requests"]
    assert value(requests, "mcp_requests_total", tenant="tenant-a", method="tools/call", outcome="ok") == 3
    assert (
        value(requests, "mcp_requests_total", tenant="tenant-a", method="tools/call", outcome="tool_error")
        == 1
    )
    assert value(requests, "mcp_requests_total", tenant="tenant-b", method="tools/list", outcome="error") == 1
    latency = metrics["mcp_tool_call_duration_seconds"]
    bucket = "mcp_tool_call_duration_seconds_bucket"
    assert value(latency, bucket, tenant="tenant-a", tool="echo", le="0.005") == 1
    assert value(latency, bucket, tenant="tenant-a", tool="echo", le="0.025") == 2
    assert value(latency, bucket, tenant="tenant-a", tool="echo", le="+Inf") == 4
    assert value(latency, "mcp_tool_call_duration_seconds_count", tenant="tenant-a", tool="echo") == 4
    assert (
        round(value(latency, "mcp_tool_call_duration_seconds_sum", tenant="tenant-a", tool="echo"), 3)
        == 0.263
    )


def test_a_failed_flush_given_back_is_counted_once(client, tenant_a, fresh_recorder):
    fresh_recorder.record(tenant_a.id, "ping", "", 0.001)
    pending, errors = fresh_recorder.take()
    fresh_recorder.give_back(pending, errors)
    assert (
        value(
            scrape(client)["mcp_requests"],
            "mcp_requests_total",
            tenant="tenant-a",
            method="ping",
            outcome="ok",
        )
        == 1
    )
    fresh_recorder.take()
    assert (
        value(
            scrape(client)["mcp_requests"],
            "mcp_requests_total",
            tenant="tenant-a",
            method="ping",
            outcome="ok",
        )
        == 1
    )


def test_tenants_past_the_cap_are_folded_into_other_the_busiest_kept(
    client, settings, tenant_a, tenant_b, fresh_recorder
):
    settings.MCP_METRICS_MAX_TENANTS = 1
    quiet = Tenant.objects.create(slug="quiet", name="Quiet")
    for _ in range(3):
        fresh_recorder.record(tenant_a.id, "tools/call", "echo", 0.01)
    fresh_recorder.record(tenant_b.id, "tools/call", "secret_tool", 0.01)
    fresh_recorder.record(quiet.id, "ping", "", 0.01)
    requests = scrape(client)["mcp_requests"]
    assert {s.labels["tenant"] for s in requests} == {"tenant-a", "(other)"}
    assert not any("secret_tool" in str(s.labels) for s in requests)
    assert value(requests, "mcp_requests_total", tenant="(other)", method="tools/call", outcome="ok") == 1


def test_background_runs_by_status_and_oauth_outcomes_are_reported(client, tenant_a, fresh_recorder):
    ToolRun.objects.create(job_id="j1", tenant=tenant_a, tool_name="slow", status=ToolRun.Status.RUNNING)
    ToolRun.objects.create(job_id="j2", tenant=tenant_a, tool_name="slow", status=ToolRun.Status.LOST)
    client.post("/oauth/token", {"grant_type": "authorization_code", "code": "nope", "client_id": "x"})
    metrics = scrape(client)
    assert value(metrics["mcp_background_runs"], "mcp_background_runs", status="running") == 1
    assert value(metrics["mcp_background_runs"], "mcp_background_runs", status="lost") == 1
    assert value(metrics["mcp_oauth_events"], "mcp_oauth_events_total", kind="token", outcome="refused") >= 1


def test_without_settings_only_loopback_may_scrape(client):
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


def test_a_metrics_token_is_required_once_set_whatever_the_address(client, settings):
    settings.MCP_METRICS_TOKEN = "scrape-me"
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me", REMOTE_ADDR="203.0.113.9")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain; version=")


def test_allowed_networks_replace_loopback(client, settings):
    settings.MCP_METRICS_ALLOW = ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_refusals_past_a_quota_or_cap_are_counted_by_limit(client, fresh_recorder, monkeypatch):
    monkeypatch.setattr(quotas, "_refusals", Counter({"sessions": 2, "calls_per_minute": 5}))
    refused = scrape(client)["mcp_limit_refusals"]
    assert value(refused, "mcp_limit_refusals_total", limit="sessions") == 2
    assert value(refused, "mcp_limit_refusals_total", limit="calls_per_minute") == 5


@pytest.mark.services
def test_the_workers_taking_jobs_from_the_queue_are_a_gauge_at_zero_when_none_is_alive(client, settings):
    # AMB-113: what readiness no longer fails on is watched here instead.
    settings.MCP_BACKGROUND_TOOLS = "celery"
    queue = settings.MCP_BACKGROUND_QUEUE = f"mcp-metrics-{secrets.token_hex(4)}"
    assert value(scrape(client)["mcp_background_workers"], "mcp_background_workers", queue=queue) == 0
    presence.beat("w1@host", [queue])
    try:
        assert value(scrape(client)["mcp_background_workers"], "mcp_background_workers", queue=queue) == 1
    finally:
        presence.leave("w1@host", [queue])
    assert value(scrape(client)["mcp_background_workers"], "mcp_background_workers", queue=queue) == 0


def test_without_workers_in_the_deployment_there_is_no_workers_gauge(client, settings):
    settings.MCP_BACKGROUND_TOOLS = "inline"
    assert "mcp_background_workers" not in scrape(client)


@pytest.fixture
def upstream_health(settings) -> Iterator[None]:
    """Loopback upstreams allowed, a breaker that opens after 2 failures, this process's health forgotten."""
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_UPSTREAM_BREAKER_FAILURES = 2
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 60
    breaker.reset()
    call_stats.reset()
    yield
    breaker.reset()
    call_stats.reset()


def test_a_killed_upstream_shows_its_failures_and_open_circuit_by_tenant_and_name(
    client, tenant_a, tmp_path, upstream_health, fresh_recorder
):
    with running_upstream(tmp_path) as server:
        row = make_upstream(tenant_a, server.url + "?token=hidden-in-the-url")
        kill_until_open(server, row, 2)
    assert isinstance(call_row(row, "echo", {"message": "refused"}), federation.UpstreamUnavailable)

    metrics = scrape(client)
    calls = metrics["mcp_upstream_calls"]
    assert value(calls, "mcp_upstream_calls_total", tenant="tenant-a", upstream="docs", outcome="ok") == 1
    assert (
        value(calls, "mcp_upstream_calls_total", tenant="tenant-a", upstream="docs", outcome="unavailable")
        == 3
    )
    circuit = metrics["mcp_upstream_circuit"]
    assert value(circuit, "mcp_upstream_circuit", tenant="tenant-a", upstream="docs", state="open") == 1
    assert value(circuit, "mcp_upstream_circuit", tenant="tenant-a", upstream="docs", state="closed") == 0
    latency = metrics["mcp_upstream_call_duration_seconds"]
    assert value(latency, "mcp_upstream_call_duration_seconds_count", tenant="tenant-a", upstream="docs") == 1
    assert value(
        metrics["mcp_upstream_last_success_timestamp_seconds"],
        "mcp_upstream_last_success_timestamp_seconds",
        tenant="tenant-a",
        upstream="docs",
    ) == pytest.approx(time.time(), abs=60)
    text = client.get("/metrics").content.decode()
    assert "hidden-in-the-url" not in text and str(server.port) not in text


def test_a_tenants_upstreams_past_the_cap_are_one_other_series(
    client, settings, tenant_a, tenant_b, upstream_health, fresh_recorder
):
    # A hostile tenant with many upstreams adds at most MCP_METRICS_MAX_UPSTREAMS + 1 series per metric.
    settings.MCP_METRICS_MAX_UPSTREAMS = 2
    rows = [make_upstream(tenant_a, f"https://u{i}.example.com/mcp", name=f"u{i}") for i in range(5)]
    mine = make_upstream(tenant_b, "https://b.example.com/mcp", name="billing")
    for i, row in enumerate(rows):
        for _ in range(10 - i):  # u0 is the most called
            call_stats.record((tenant_a.id, row.pk), 0.01, None)
    call_stats.record((tenant_a.id, rows[4].pk), 0.01, call_stats.TIMEOUT)
    call_stats.record((tenant_b.id, mine.pk), 0.01, None)

    calls = scrape(client)["mcp_upstream_calls"]
    assert {(s.labels["tenant"], s.labels["upstream"]) for s in calls} == {
        ("tenant-a", "u0"), ("tenant-a", "u1"), ("tenant-a", "(other)"), ("tenant-b", "billing")
    }  # fmt: skip
    other = {"tenant": "tenant-a", "upstream": "(other)"}
    assert value(calls, "mcp_upstream_calls_total", **other, outcome="ok") == 8 + 7 + 6
    assert value(calls, "mcp_upstream_calls_total", **other, outcome="timeout") == 1
