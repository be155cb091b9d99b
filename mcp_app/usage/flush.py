"""Writing what the recorder gathered: one statement for all buckets of a flush, off the request path.

A daemon thread of each serving process flushes every MCP_USAGE_FLUSH_SECONDS, and once more at
exit. Buckets are upserted as increments (`x = x + excluded.x`, PostgreSQL and SQLite alike), so any
number of processes add into the same rows without reading them first; errors are appended and
each tenant's are trimmed to the newest few; open listeners are published to Redis under this
process's name; each upstream's health rides along (usage/upstream_health.py, AMB-185), and so do the
governance events (governance/audit.py, AMB-355). Buckets older than MCP_USAGE_RETENTION_DAYS and
events older than MCP_GOVERNANCE_EVENT_DAYS are deleted about once an hour (AMB-66).
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Subquery

from mcp_app.governance import audit
from mcp_app.infra import redis_client, tracing
from mcp_app.models import LATENCY_FIELDS, GovernanceEvent, UsageBucket, UsageError
from mcp_app.usage import live, upstream_health
from mcp_app.usage.recorder import RECENT_ERRORS, Counts, ErrorEntry, Key, Recorder, recorder
from tenants import wall
from tenants.models import Tenant

logger = logging.getLogger(__name__)

COLUMNS = (
    "tenant_id",
    "minute",
    "method",
    "tool",
    "calls",
    "errors",
    "tool_errors",
    "duration_ms",
    *LATENCY_FIELDS,
)
ADDED = COLUMNS[4:]
ROWS_PER_STATEMENT = 500
PRUNE_EVERY_SECONDS = 3600.0
ARGUMENTS_CHARS = 1000
# Argument names whose values never reach the dashboard (a tool may take a password or a token).
SECRET_NAME = re.compile(r"pass|secret|token|key|auth|credential|cookie|session", re.IGNORECASE)


# Keys whose values are opaque to a person (a 2026-07-28 round's sealed state): their size only.
OPAQUE_KEYS = frozenset({"requestState"})
# A long run of base64 or hex is a blob (an image, a sealed token), not something to read on the dashboard.
BLOB = re.compile(r"[A-Za-z0-9+/_=-]{120,}")


def opaque(value: Any) -> str:
    return f"<opaque, {len(value) if isinstance(value, str) else len(json.dumps(value, default=str))} characters>"


def redacted(value: Any, depth: int = 0) -> Any:
    """`value` with the values of secret-looking keys replaced, opaque state and blobs shortened to their
    size (AMB-234), at any depth (bounded)."""
    if depth > 8:
        return "…"
    if isinstance(value, dict):
        return {
            str(k): "***"
            if SECRET_NAME.search(str(k))
            else opaque(v)
            if k in OPAQUE_KEYS
            else redacted(v, depth + 1)
            for k, v in value.items()
            if k != "_meta"
        }
    if isinstance(value, list):
        return [redacted(v, depth + 1) for v in value[:50]]
    if isinstance(value, str) and BLOB.fullmatch(value):
        return f"{value[:16]}… {opaque(value)}"
    return value


def arguments_text(params: Any) -> str:
    if params is None:
        return ""
    text = json.dumps(redacted(params), default=str, ensure_ascii=False)
    return text if len(text) <= ARGUMENTS_CHARS else text[: ARGUMENTS_CHARS - 1] + "…"


def _upsert(rows: list[tuple[Any, ...]]) -> None:
    table = connection.ops.quote_name(UsageBucket._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in COLUMNS)
    key = ", ".join(connection.ops.quote_name(c) for c in COLUMNS[:4])
    added = ", ".join(
        f"{connection.ops.quote_name(c)} = {table}.{connection.ops.quote_name(c)} + excluded.{connection.ops.quote_name(c)}"
        for c in ADDED
    )
    one = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            sql = (
                f"INSERT INTO {table} ({names}) VALUES {', '.join([one] * len(chunk))} "
                f"ON CONFLICT ({key}) DO UPDATE SET {added}"
            )
            cursor.execute(sql, [v for row in chunk for v in row])


def write(pending: dict[Key, Counts], errors: dict[int, list[ErrorEntry]]) -> None:
    """Add the buckets and append the errors (tenants deleted meanwhile are skipped)."""
    tenant_ids = {key[0] for key in pending} | set(errors)
    if not tenant_ids:
        return
    alive = set(Tenant.objects.filter(id__in=tenant_ids).values_list("id", flat=True))
    # Sorted: concurrent flushes of several processes lock rows in the same order (no deadlock).
    rows = [
        (*key, c.calls, c.errors, c.tool_errors, c.duration_ms, *c.histogram)
        for key, c in sorted(pending.items())
        if key[0] in alive
    ]
    entries = [
        UsageError(
            tenant_id=tenant_id,
            at=datetime.fromtimestamp(e.at, UTC),
            kind=e.kind,
            method=e.method,
            tool=e.tool,
            code=e.code,
            message=e.message,
            arguments=arguments_text(e.params),
        )
        for tenant_id, found in errors.items()
        if tenant_id in alive
        for e in found
    ]
    with transaction.atomic():
        if rows:
            _upsert(rows)
        if entries:
            UsageError.objects.bulk_create(entries)
    for tenant_id in {e.tenant_id for e in entries}:
        newest = UsageError.objects.filter(tenant_id=tenant_id).order_by("-id").values("id")[:RECENT_ERRORS]
        UsageError.objects.filter(tenant_id=tenant_id).exclude(id__in=Subquery(newest)).delete()


def write_governance(events: list[audit.Event]) -> None:
    """The governance events gathered since the last flush (AMB-355), in batches; a tenant deleted
    meanwhile took its events with it."""
    if not events:
        return
    live_ids = set(Tenant.objects.filter(id__in={e.tenant_id for e in events}).values_list("id", flat=True))
    kept = [e for e in events if e.tenant_id in live_ids]
    GovernanceEvent.objects.bulk_create(
        [
            GovernanceEvent(
                tenant_id=e.tenant_id, created_at=datetime.fromtimestamp(e.at, UTC), kind=e.kind, rule=e.rule,
                target=e.target, method=e.method, caller=e.caller, detail=e.detail,
            )  # fmt: skip
            for e in kept
        ],
        batch_size=ROWS_PER_STATEMENT,
    )
    # And as OpenTelemetry log records where OTEL_LOGS_EXPORTER names an exporter (AMB-358).
    tracing.export_events((e.at, f"mcp.governance.{e.kind}", governance_line(e), governance_attributes(e)) for e in kept)


def governance_line(event: audit.Event) -> str:
    by = f"policy, guardrail or quota {event.rule!r}" if event.rule else "no allow policy held"
    return f"{event.kind} {event.method} of {event.target!r} for {event.caller} ({by})"


def governance_attributes(event: audit.Event) -> dict[str, Any]:
    return {
        "mcp.tenant.id": event.tenant_id, "mcp.governance.kind": event.kind, "mcp.governance.rule": event.rule,
        "mcp.governance.target": event.target, "mcp.method.name": event.method,
        "mcp.governance.caller": event.caller, "mcp.governance.detail": json.dumps(event.detail, sort_keys=True),
    }  # fmt: skip


def prune_governance(now: float, batch: int = 10_000) -> int:
    """Delete governance events older than MCP_GOVERNANCE_EVENT_DAYS, a batch at a time: a table of
    millions is trimmed without one long lock."""
    cutoff = datetime.fromtimestamp(now - settings.MCP_GOVERNANCE_EVENT_DAYS * 86_400, UTC)
    deleted = 0
    while ids := list(GovernanceEvent.objects.filter(created_at__lt=cutoff).values_list("id", flat=True)[:batch]):
        deleted += GovernanceEvent.objects.filter(id__in=ids).delete()[0]
    return deleted


def prune(now: float | None = None) -> int:
    """Delete buckets older than the retention (any process may; a second delete finds nothing)."""
    now = time.time() if now is None else now
    cutoff = int(now // 60) - settings.MCP_USAGE_RETENTION_DAYS * 24 * 60
    deleted, _ = UsageBucket.objects.filter(minute__lt=cutoff).delete()
    return deleted


class Flusher:
    """Flushes one recorder: counts to the database, listeners to Redis, pruning now and then."""

    def __init__(self, source: Recorder | None = None) -> None:
        self.recorder = source or recorder()
        self.upstreams = upstream_health.HealthFlusher(self.recorder.process_id)
        self._published: set[int] = set()
        self._pruned = 0.0
        self._lock = threading.Lock()

    def flush(self) -> None:
        # The lock: the timer thread and the exit hook never write the same counts twice. The bypass:
        # one upsert for every tenant this process served, across tenants on purpose.
        with self._lock, wall.bypass("usage flush"):
            pending, errors = self.recorder.take()
            try:
                write(pending, errors)
            except Exception:
                self.recorder.give_back(pending, errors)
                raise
            events, dropped = audit.take()
            if dropped:
                logger.warning("%d governance events dropped: more than %d waited for one flush", dropped,
                               audit.MAX_PENDING)  # fmt: skip
            try:
                write_governance(events)
            except Exception:
                audit.give_back(events)
                raise
            if redis_client.enabled():
                self._published = live.publish_listeners(self.recorder, self._published)
            self.upstreams.flush()
            now = time.time()
            if now - self._pruned > PRUNE_EVERY_SECONDS:
                self._pruned = now
                prune(now)
                prune_governance(now)
                upstream_health.prune(now)


_FLUSHER = Flusher()
_started = threading.Event()


def flush() -> None:
    """Flush this process's recorder now (the timer does it every MCP_USAGE_FLUSH_SECONDS)."""
    _FLUSHER.flush()


def _loop() -> None:
    while True:
        time.sleep(max(float(settings.MCP_USAGE_FLUSH_SECONDS), 1.0))
        try:
            flush()
        except Exception:
            logger.warning("usage flush failed; its counts are kept for the next one", exc_info=True)
        finally:
            connection.close()  # this thread's own connection; a broken one is reopened next time


def _at_exit() -> None:
    try:
        flush()
    except Exception:
        logger.warning("usage flush at exit failed", exc_info=True)


def start_in_forked_child() -> bool:
    """Start the flush in a process forked from one that had imported this, such as a Celery pool
    child: its background jobs call upstreams, whose health must reach the admin too (AMB-185). The
    child reports as a process of its own (a sibling's breaker state is not its)."""
    global _FLUSHER
    recorder().forked()
    _FLUSHER = Flusher()
    _started.clear()  # a thread started in the parent did not survive the fork
    return start()


def started() -> bool:
    return _started.is_set()


def start() -> bool:
    """Start this process's flush timer and exit hook, once; not when MCP_USAGE_FLUSH_SECONDS is 0."""
    if not settings.MCP_USAGE_FLUSH_SECONDS or _started.is_set():
        return False
    _started.set()
    threading.Thread(target=_loop, name="usage-flush", daemon=True).start()
    atexit.register(_at_exit)
    return True
