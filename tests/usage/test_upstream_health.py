"""Upstream health rides the usage flush: increments from several processes add into one bucket per
upstream and minute, the last success is the greatest, each process's circuit is kept with the time it
reported it, nothing new writes nothing, and a day's rows are kept (AMB-185)."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.federation import breaker, call_stats
from mcp_app.models import Upstream, UpstreamCircuit, UpstreamHealth
from mcp_app.models.upstreams import HEALTH_LATENCY_FIELDS
from mcp_app.upstreams import deployment_health
from mcp_app.usage import upstream_health
from mcp_app.usage.flush import Flusher
from mcp_app.usage.recorder import Recorder
from mcp_app.usage.upstream_health import HealthFlusher
from tests.upstreams.snapshots import seen

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def upstream(tenant_a) -> Upstream:
    return Upstream.objects.create(tenant=tenant_a, name="docs", url="https://docs.example/mcp")


def test_the_histogram_columns_are_the_federations_buckets() -> None:
    assert len(HEALTH_LATENCY_FIELDS) == len(call_stats.BOUNDS_MS) + 1


def test_two_processes_add_into_one_bucket_with_the_greatest_last_success(upstream) -> None:
    key, now = (upstream.tenant_id, upstream.pk), time.time()
    one, two = HealthFlusher("web-1:11:a"), HealthFlusher("web-2:22:b")
    # Process one: 90 fast answers. Process two: 10 slow answers, 2 timeouts, 3 not reached; its
    # last success is the newer, and it flushes first.
    one.flush({key: seen(90, latencies_ms=(3,) * 90, last_success=now - 30)}, now)
    two.flush(
        {
            key: seen(
                15, latencies_ms=(300,) * 10 + (30000,) * 2, last_success=now - 5, timeout=2, unavailable=3
            )
        },
        now,
    )
    # Process one's counts are since it started: its next flush adds only the 8 new calls, and its
    # older last success does not replace process two's.
    one.flush({key: seen(98, latencies_ms=(3,) * 98, last_success=now - 20)}, now)

    (row,) = UpstreamHealth.objects.all()
    assert (row.tenant_id, row.minute, row.calls) == (upstream.tenant_id, int(now // 60), 113)
    assert (row.unavailable, row.error, row.timeout, row.busy) == (3, 0, 2, 0)
    assert row.h_00 == 98 and row.h_06 == 10 and row.h_11 == 2
    assert abs(row.last_success.timestamp() - (now - 5)) < 0.01

    view = deployment_health.of(upstream, now)
    assert view.totals.calls == 113 and view.totals.failed == 5
    assert view.totals.percentile(0.5) < 5  # the fast majority, summed across both processes
    assert 250 < view.totals.percentile(0.95) <= 500  # process two's slow tenth
    assert [(c.process, c.state, c.stale) for c in view.circuits] == [
        ("web-1:11:a", "closed", False),
        ("web-2:22:b", "closed", False),
    ]


def test_an_open_circuit_not_confirmed_for_two_flushes_is_stale(upstream, settings) -> None:
    settings.MCP_USAGE_FLUSH_SECONDS = 10
    key, now = (upstream.tenant_id, upstream.pk), time.time()
    gone, alive = HealthFlusher("web-1:11:a"), HealthFlusher("web-2:22:b")
    gone.flush({key: seen(3, unavailable=3, circuit=breaker.OPEN)}, now - 25)  # then the process stopped
    alive.flush({key: seen(3, unavailable=3, circuit=breaker.OPEN)}, now - 25)
    # No new call, but still open: the live process says so again at its next flushes.
    assert alive.flush({key: seen(3, unavailable=3, circuit=breaker.OPEN)}, now - 15) == 1
    assert alive.flush({key: seen(3, unavailable=3, circuit=breaker.OPEN)}, now - 5) == 1
    assert UpstreamHealth.objects.get().calls == 6  # the repeated reports added no calls

    view = deployment_health.of(upstream, now)
    assert [(c.process, c.state, c.stale) for c in view.circuits] == [
        ("web-1:11:a", "open", True),
        ("web-2:22:b", "open", False),
    ]


def test_a_process_with_nothing_new_writes_nothing(upstream) -> None:
    key, now = (upstream.tenant_id, upstream.pk), time.time()
    flusher = HealthFlusher("web-1:11:a")
    with CaptureQueriesContext(connection) as captured:
        assert flusher.flush({}, now) == 0
    assert captured.captured_queries == []
    flusher.flush({key: seen(2, latencies_ms=(3, 3), last_success=now)}, now)
    with CaptureQueriesContext(connection) as captured:
        assert flusher.flush({key: seen(2, latencies_ms=(3, 3), last_success=now)}, now + 10) == 0
    assert captured.captured_queries == []
    assert UpstreamHealth.objects.get().calls == 2


def test_the_usage_flush_carries_this_processs_upstream_health(upstream) -> None:
    call_stats.reset()
    try:
        call_stats.record((upstream.tenant_id, upstream.pk), 0.003, None)
        call_stats.record((upstream.tenant_id, upstream.pk), 0.003, call_stats.ERROR)
        call_stats.record(
            (upstream.tenant_id, 999_999), 0.003, None
        )  # an upstream deleted meanwhile: skipped
        Flusher(Recorder("web-1:11:a")).flush()
    finally:
        call_stats.reset()
    row = UpstreamHealth.objects.get()
    assert (row.upstream_id, row.calls, row.error, row.h_00) == (upstream.pk, 2, 1, 2)
    assert UpstreamCircuit.objects.get().process == "web-1:11:a"


def test_a_days_buckets_and_process_states_are_kept_and_older_ones_pruned(upstream) -> None:
    key, now = (upstream.tenant_id, upstream.pk), time.time()
    for hours in (0, 23, 25):
        HealthFlusher(f"web-{hours}").flush({key: seen(1, latencies_ms=(3,))}, now - hours * 3600)
    assert upstream_health.prune(now) == 2  # the 25-hour-old bucket and that process's state
    assert sorted(UpstreamHealth.objects.values_list("minute", flat=True)) == [
        int((now - 23 * 3600) // 60),
        int(now // 60),
    ]
    assert sorted(UpstreamCircuit.objects.values_list("process", flat=True)) == ["web-0", "web-23"]
