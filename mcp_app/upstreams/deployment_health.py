"""An upstream's health across the deployment, read from what every process's flush wrote (AMB-185).

The last hour's buckets summed (calls, failures by kind, the latency histogram, so the p50 is the
deployment's), the last success any process saw within the retention, and each process's breaker
state with the time it reported it: an open or half-open circuit not confirmed within two flushes is
stale (its process stopped, or stopped calling). Read through the tenant's querysets, under the wall.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Max, Sum

from mcp_app.federation import breaker, call_stats
from mcp_app.models import Upstream, UpstreamCircuit, UpstreamHealth
from mcp_app.models.upstreams import FAILURE_FIELDS, HEALTH_LATENCY_FIELDS

WINDOW_MINUTES = 60
STALE_FLUSHES = 2


@dataclass(frozen=True, slots=True)
class Circuit:
    process: str
    state: str
    reported_at: datetime
    stale: bool


@dataclass(frozen=True, slots=True)
class Deployment:
    """The whole deployment's view of one upstream over the last WINDOW_MINUTES."""

    totals: call_stats.Health  # summed counts; last_success within the retention
    circuits: list[Circuit]  # the processes that reported within the window

    @property
    def fresh(self) -> list[Circuit]:
        return [c for c in self.circuits if not c.stale]


def stale_after_seconds() -> float:
    return STALE_FLUSHES * max(float(settings.MCP_USAGE_FLUSH_SECONDS), 1.0)


def of(upstream: Upstream, now: float | None = None) -> Deployment:
    now = time.time() if now is None else now
    mine = UpstreamHealth.objects.filter(tenant_id=upstream.tenant_id, upstream_id=upstream.pk)
    summed = mine.filter(minute__gt=int(now // 60) - WINDOW_MINUTES).aggregate(
        calls=Sum("calls"),
        duration_ms=Sum("duration_ms"),
        **{name: Sum(name) for name in (*FAILURE_FIELDS, *HEALTH_LATENCY_FIELDS)},
    )
    latest = mine.aggregate(at=Max("last_success"))["at"]
    totals = call_stats.Health(
        calls=summed["calls"] or 0,
        failures={kind: summed[kind] or 0 for kind in FAILURE_FIELDS},
        last_success=latest.timestamp() if latest is not None else None,
        duration_ms=summed["duration_ms"] or 0.0,
        histogram=[summed[name] or 0 for name in HEALTH_LATENCY_FIELDS],
    )
    since = datetime.fromtimestamp(now - WINDOW_MINUTES * 60, UTC)
    stale_before = datetime.fromtimestamp(now - stale_after_seconds(), UTC)
    rows = UpstreamCircuit.objects.filter(
        tenant_id=upstream.tenant_id, upstream_id=upstream.pk, reported_at__gte=since
    )
    circuits = [
        Circuit(
            row.process,
            row.state,
            row.reported_at,
            stale=row.state != breaker.CLOSED and row.reported_at < stale_before,
        )
        for row in rows
    ]
    return Deployment(totals, circuits)
