"""Each upstream's health, written by the usage flush so the admin sees every process's (AMB-185).

The federation counts in memory since the process started (federation/call_stats.py); each flush takes a
snapshot, subtracts what this process wrote last time and adds the difference into the upstream's
bucket of the current minute (`x = x + excluded.x`, so processes add into the same row unread), the
last success as the greatest any process saw. Beside it, each process's breaker state with the time it
said so: written when there were calls, when it changed, and at every flush while it is not closed, so
an open circuit no process has confirmed for two flushes reads as stale. Nothing new, nothing written.
Buckets and process states older than RETENTION_HOURS are deleted with the usage buckets (hourly).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from mcp_app.federation import breaker, call_stats
from mcp_app.models import Upstream, UpstreamCircuit, UpstreamHealth
from mcp_app.models.upstreams import FAILURE_FIELDS, HEALTH_LATENCY_FIELDS

RETENTION_HOURS = 24
COLUMNS = (
    "tenant_id",
    "upstream_id",
    "minute",
    "calls",
    *FAILURE_FIELDS,
    "duration_ms",
    *HEALTH_LATENCY_FIELDS,
    "last_success",
)
ADDED = COLUMNS[3:-1]
ROWS_PER_STATEMENT = 500
Key = tuple[int, int]  # (tenant id, upstream id): federation's Target.upstream_key


@dataclass(frozen=True, slots=True)
class Increment:
    """What one upstream's exchanges came to in this process since its previous flush."""

    calls: int
    failures: tuple[int, ...]  # in FAILURE_FIELDS order
    duration_ms: float
    histogram: tuple[int, ...]
    last_success: float | None  # set only when there was a success since


def increment(before: call_stats.Health | None, now: call_stats.Health) -> Increment | None:
    """`now` minus `before` (what was written last); None when no exchange happened in between."""
    if before is None or now.calls < before.calls:  # first sight, or the counts were reset (tests)
        before = call_stats.Health()
    if now.calls == before.calls:
        return None
    return Increment(
        now.calls - before.calls,
        tuple(now.failures[kind] - before.failures[kind] for kind in FAILURE_FIELDS),
        now.duration_ms - before.duration_ms,
        tuple(n - b for n, b in zip(now.histogram, before.histogram, strict=True)),
        now.last_success if now.last_success != before.last_success else None,
    )


def _upsert(rows: Sequence[tuple[Any, ...]]) -> None:
    quote = connection.ops.quote_name
    table = quote(UpstreamHealth._meta.db_table)
    names = ", ".join(quote(c) for c in COLUMNS)
    added = ", ".join(f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in ADDED)
    # The greatest of two, either of which may be NULL: GREATEST skips NULLs, SQLite's max() does not.
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    success = quote("last_success")
    kept = (
        f"{success} = {greatest}(COALESCE({table}.{success}, excluded.{success}), "
        f"COALESCE(excluded.{success}, {table}.{success}))"
    )
    one = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([one] * len(chunk))} "
                f"ON CONFLICT ({quote('upstream_id')}, {quote('minute')}) DO UPDATE SET {added}, {kept}",
                [v for row in chunk for v in row],
            )


class HealthFlusher:
    """One process's writer: remembers what it wrote, so each flush adds only what is new."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id[:200]
        self._written: dict[Key, call_stats.Health] = {}
        self._circuits: dict[Key, str] = {}
        self._lock = threading.Lock()

    def flush(self, seen: dict[Key, call_stats.Health] | None = None, now: float | None = None) -> int:
        """Write what changed since the last flush (the caller bypasses the wall); the rows written."""
        seen = call_stats.snapshot() if seen is None else seen
        now = time.time() if now is None else now
        with self._lock:
            increments = {key: increment(self._written.get(key), h) for key, h in seen.items()}
            reporting = {
                key: h.circuit
                for key, h in seen.items()
                if increments[key] is not None
                or h.circuit != breaker.CLOSED
                or h.circuit != self._circuits.get(key, breaker.CLOSED)
            }
            if not reporting:
                return 0
            written = self._write(increments, reporting, now)
            # Only after the write: a failed flush leaves the difference for the next one.
            self._written.update({key: h for key, h in seen.items() if increments[key] is not None})
            self._circuits.update(reporting)
            return written

    def _write(self, increments: dict[Key, Increment | None], reporting: dict[Key, str], now: float) -> int:
        ids = {key[1] for key in reporting}
        alive = set(
            Upstream.objects.filter(id__in=ids).values_list("tenant_id", "id")
        )  # deleted meanwhile: skipped
        minute = int(now // 60)
        at = datetime.fromtimestamp(now, UTC)
        rows = []
        # Sorted: concurrent flushes of several processes lock rows in the same order (no deadlock).
        for key, inc in sorted((k, i) for k, i in increments.items() if i is not None and k in alive):
            success = datetime.fromtimestamp(inc.last_success, UTC) if inc.last_success is not None else None
            rows.append(
                (
                    *key,
                    minute,
                    inc.calls,
                    *inc.failures,
                    inc.duration_ms,
                    *inc.histogram,
                    connection.ops.adapt_datetimefield_value(success),
                )
            )
        circuits = [
            UpstreamCircuit(
                tenant_id=key[0], upstream_id=key[1], process=self.process_id, state=state, reported_at=at
            )
            for key, state in sorted(reporting.items())
            if key in alive
        ]
        with transaction.atomic():
            if rows:
                _upsert(rows)
            if circuits:
                UpstreamCircuit.objects.bulk_create(
                    circuits,
                    update_conflicts=True,
                    unique_fields=["upstream", "process"],
                    update_fields=["state", "reported_at"],
                )
        return len(rows) + len(circuits)


def prune(now: float | None = None) -> int:
    """Delete buckets and process states older than RETENTION_HOURS (the caller bypasses the wall)."""
    now = time.time() if now is None else now
    buckets, _ = UpstreamHealth.objects.filter(minute__lt=int(now // 60) - RETENTION_HOURS * 60).delete()
    cutoff = datetime.fromtimestamp(now - RETENTION_HOURS * 3600, UTC)
    circuits, _ = UpstreamCircuit.objects.filter(reported_at__lt=cutoff).delete()
    return buckets + circuits
