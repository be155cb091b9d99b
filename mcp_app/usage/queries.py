"""Reading usage back for the dashboard: sums per tool and per time step over a window, live counts.

Percentiles are computed from the summed histograms (buckets of every process and minute add up),
so p50/p95 of a step or a tool are those of all its requests, within a bucket's resolution.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import F, Sum

from mcp_app.models import LATENCY_FIELDS, ToolRun, UsageBucket, UsageError
from mcp_app.usage import live
from mcp_app.usage.recorder import percentile

# name -> (minutes covered, minutes per chart step)
WINDOWS: dict[str, tuple[int, int]] = {"hour": (60, 1), "day": (24 * 60, 20), "week": (7 * 24 * 60, 120)}
SUMMED = ("calls", "errors", "tool_errors", "duration_ms", *LATENCY_FIELDS)
_SUMS = {f"s_{name}": Sum(name) for name in SUMMED}


@dataclass
class Totals:
    calls: int = 0
    errors: int = 0
    tool_errors: int = 0
    duration_ms: float = 0.0
    histogram: tuple[int, ...] = ()

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Totals:
        return cls(
            calls=row["s_calls"] or 0,
            errors=row["s_errors"] or 0,
            tool_errors=row["s_tool_errors"] or 0,
            duration_ms=row["s_duration_ms"] or 0.0,
            histogram=tuple(row[f"s_{name}"] or 0 for name in LATENCY_FIELDS),
        )

    @property
    def failed(self) -> int:
        return self.errors + self.tool_errors

    @property
    def error_rate(self) -> float | None:
        return self.failed / self.calls if self.calls else None

    @property
    def p50(self) -> float | None:
        return percentile(list(self.histogram), 0.50) if self.histogram else None

    @property
    def p95(self) -> float | None:
        return percentile(list(self.histogram), 0.95) if self.histogram else None


@dataclass
class Row:
    """One method (and tool) over the window."""

    method: str
    tool: str
    totals: Totals


@dataclass
class Step:
    """All of a tenant's requests in one chart step."""

    start: datetime
    totals: Totals


def window_minutes(window: str, now: float | None = None) -> tuple[int, int, int]:
    """(first minute, last minute, minutes per step) of a window ending now, aligned to its steps."""
    span, step = WINDOWS[window]
    last = int((time.time() if now is None else now) // 60)
    first = (last - span + 1) // step * step
    return first, last, step


def by_tool(tenant_id: int, window: str, now: float | None = None) -> list[Row]:
    first, _last, _step = window_minutes(window, now)
    rows = (
        UsageBucket.objects.filter(tenant_id=tenant_id, minute__gte=first)
        .values("method", "tool")
        .annotate(**_SUMS)
    )
    found = [Row(r["method"], r["tool"], Totals.of(r)) for r in rows]
    return sorted(found, key=lambda r: (-r.totals.calls, r.method, r.tool))


def over_time(tenant_id: int, window: str, now: float | None = None) -> list[Step]:
    """One Step per chart step of the window, empty steps included (the x axis is continuous)."""
    first, last, step = window_minutes(window, now)
    rows = (
        UsageBucket.objects.filter(tenant_id=tenant_id, minute__gte=first)
        .annotate(step=F("minute") / step)
        .values("step")
        .annotate(**_SUMS)
    )
    found = {int(r["step"]): Totals.of(r) for r in rows}
    return [
        Step(datetime.fromtimestamp(s * step * 60, UTC), found.get(s, Totals()))
        for s in range(first // step, last // step + 1)
    ]


def per_tenant(window: str, now: float | None = None) -> dict[int, Totals]:
    """Every tenant's totals over the window (the superuser's overview)."""
    first, _last, _step = window_minutes(window, now)
    rows = UsageBucket.objects.filter(minute__gte=first).values("tenant_id").annotate(**_SUMS)
    return {r["tenant_id"]: Totals.of(r) for r in rows}


def recent_errors(tenant_id: int) -> list[UsageError]:
    return list(UsageError.objects.filter(tenant_id=tenant_id).order_by("-id")[:50])


def background_runs(tenant_id: int, window: str, now: float | None = None) -> dict[str, Any]:
    """Background runs queued in the window: how many per status, and how long the finished ones ran."""
    first, _last, _step = window_minutes(window, now)
    since = datetime.fromtimestamp(first * 60, UTC)
    rows = ToolRun.objects.filter(tenant_id=tenant_id, queued_at__gte=since).values_list(
        "status", "started_at", "finished_at"
    )[:10_000]
    statuses: dict[str, int] = {}
    durations: list[float] = []
    for status, started, finished in rows:
        statuses[status] = statuses.get(status, 0) + 1
        if started is not None and finished is not None:
            durations.append((finished - started) / timedelta(milliseconds=1))
    durations.sort()

    def quantile(q: float) -> float | None:
        return durations[min(int(q * len(durations)), len(durations) - 1)] if durations else None

    return {"statuses": sorted(statuses.items()), "p50": quantile(0.5), "p95": quantile(0.95)}


def live_counts(tenant_ids: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    """(open sessions, open listeners) per tenant."""
    return live.active_sessions(tenant_ids), live.active_listeners(tenant_ids)
