"""Counting requests in process memory: the only part of usage recording on the request path.

`observe` costs a clock read, a bisect and a few integer additions under an uncontended lock; it
never touches the database or Redis. What it gathers is taken by `flush` (mcp_app.usage.flush)
every MCP_USAGE_FLUSH_SECONDS and at exit, as one write per bucket. The same counts are also kept as
process totals (`totals`), cumulative since start, which is what a Prometheus exporter reads (AMB-65).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mcp_app.models import LATENCY_BOUNDS_MS

OK, ERROR, TOOL_ERROR = 0, 1, 2
OTHER = "(other)"  # the label past the cardinality cap
MAX_LABELS_PER_TENANT = 500  # distinct (method, tool) pairs per tenant; a client picks tool names
MAX_LABEL_LENGTH = 64
RECENT_ERRORS = 50


@dataclass(slots=True)
class Counts:
    """Calls, errors and the latency histogram of one key (a tenant's method and tool, one minute)."""

    calls: int = 0
    errors: int = 0
    tool_errors: int = 0
    duration_ms: float = 0.0
    histogram: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))

    def add(self, other: Counts, sign: int = 1) -> None:
        self.calls += sign * other.calls
        self.errors += sign * other.errors
        self.tool_errors += sign * other.tool_errors
        self.duration_ms += sign * other.duration_ms
        for i, n in enumerate(other.histogram):
            self.histogram[i] += sign * n


@dataclass(slots=True)
class ErrorEntry:
    """One failed request, kept as received; serialized and truncated at flush, off the request path."""

    at: float
    kind: str
    method: str
    tool: str
    code: int | None
    message: str
    params: Any


# (tenant id, minute since the epoch, method, tool or "")
Key = tuple[int, int, str, str]


class Recorder:
    """The counts of one process since its last flush, its totals, its recent errors and open listeners."""

    def __init__(self, process_id: str | None = None) -> None:
        self._start(process_id)

    def _start(self, process_id: str | None) -> None:
        self.process_id = process_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._lock = threading.Lock()
        self._pending: dict[Key, Counts] = {}
        self._errors: dict[int, deque[ErrorEntry]] = {}
        self._labels: dict[int, set[tuple[str, str]]] = {}
        self._totals: dict[tuple[int, str, str], Counts] = {}
        self.listeners: dict[int, int] = {}

    def forked(self) -> None:
        """In a child forked after this recorder was made (a Celery pool process): a process of its
        own, with none of the parent's counts (its lock, perhaps held at the fork, is a new one)."""
        self._start(None)

    def record(self, tenant_id: int, method: str, tool: str, seconds: float, outcome: int = OK) -> None:
        """Count one request: its outcome and its latency, in this minute's bucket."""
        ms = seconds * 1000.0
        slot = bisect_left(LATENCY_BOUNDS_MS, ms)
        minute = int(time.time() // 60)
        with self._lock:
            labels = self._labels.get(tenant_id)
            if labels is None:
                labels = self._labels[tenant_id] = set()
            if (method, tool) not in labels:
                if len(labels) >= MAX_LABELS_PER_TENANT:  # past the cap, a new tool (or method) is "other"
                    if tool:
                        tool = OTHER
                    else:
                        method = OTHER
                labels.add((method, tool))
            key = (tenant_id, minute, method, tool)
            counts = self._pending.get(key)
            if counts is None:
                counts = self._pending[key] = Counts()
            counts.calls += 1
            if outcome == ERROR:
                counts.errors += 1
            elif outcome == TOOL_ERROR:
                counts.tool_errors += 1
            counts.duration_ms += ms
            counts.histogram[slot] += 1

    def remember_error(self, tenant_id: int, entry: ErrorEntry) -> None:
        with self._lock:
            ring = self._errors.get(tenant_id)
            if ring is None:
                ring = self._errors[tenant_id] = deque(maxlen=RECENT_ERRORS)
            ring.append(entry)

    def listener_opened(self, tenant_id: int) -> None:
        with self._lock:
            self.listeners[tenant_id] = self.listeners.get(tenant_id, 0) + 1

    def listener_closed(self, tenant_id: int) -> None:
        with self._lock:
            left = self.listeners.get(tenant_id, 0) - 1
            if left > 0:
                self.listeners[tenant_id] = left
            else:
                self.listeners.pop(tenant_id, None)

    def take(self) -> tuple[dict[Key, Counts], dict[int, list[ErrorEntry]]]:
        """Hand over what was gathered since the last take (the flush owns it from here)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            errors = {tenant: list(ring) for tenant, ring in self._errors.items()}
            self._errors = {}
            # Under the lock: a reader of totals_now sees each count exactly once, never in neither place.
            for (tenant_id, _minute, method, tool), counts in pending.items():
                self._totals.setdefault((tenant_id, method, tool), Counts()).add(counts)
        return pending, errors

    def give_back(self, pending: dict[Key, Counts], errors: dict[int, list[ErrorEntry]]) -> None:
        """Return what a failed flush could not write, to be written by the next one."""
        with self._lock:
            for (tenant_id, _minute, method, tool), counts in pending.items():
                self._totals[(tenant_id, method, tool)].add(counts, sign=-1)  # counted again when taken
            for key, counts in pending.items():
                mine = self._pending.get(key)
                if mine is None:
                    self._pending[key] = counts
                else:
                    mine.add(counts)
            for tenant_id, entries in errors.items():
                ring = self._errors.setdefault(tenant_id, deque(maxlen=RECENT_ERRORS))
                ring.extendleft(reversed(entries))

    def totals(self) -> dict[tuple[int, str, str], Counts]:
        """Cumulative counts per (tenant, method, tool) of everything flushed so far."""
        return self._totals

    def totals_now(self) -> dict[tuple[int, str, str], Counts]:
        """Cumulative counts since start, the ones not flushed yet included (a copy, for /metrics)."""
        with self._lock:
            merged: dict[tuple[int, str, str], Counts] = {}
            for key, counts in self._totals.items():
                merged[key] = Counts()
                merged[key].add(counts)
            for (tenant_id, _minute, method, tool), counts in self._pending.items():
                merged.setdefault((tenant_id, method, tool), Counts()).add(counts)
        return merged

    def pending_calls(self) -> int:
        with self._lock:
            return sum(c.calls for c in self._pending.values())


def percentile(histogram: list[int], q: float) -> float | None:
    """The q-quantile (0..1) in milliseconds, interpolated inside its bucket; None without calls.

    The last bucket has no upper bound: a quantile that falls there is reported as its lower bound.
    """
    total = sum(histogram)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(histogram):
        if n and seen + n >= rank:
            if i >= len(LATENCY_BOUNDS_MS):
                return float(LATENCY_BOUNDS_MS[-1])
            low = 0.0 if i == 0 else float(LATENCY_BOUNDS_MS[i - 1])
            high = float(LATENCY_BOUNDS_MS[i])
            return low + (high - low) * max(rank - seen, 0) / n
        seen += n
    return float(LATENCY_BOUNDS_MS[-1])


def observe(
    tenant_id: int,
    method: str,
    params: Any,
    response: dict[str, Any] | None,
    seconds: float,
    into: Recorder | None = None,
) -> None:
    """Count one answered request (`method` already one the server knows); remember it if it failed."""
    target = into or RECORDER
    tool = ""
    if method == "tools/call" and isinstance(params, dict):
        name = params.get("name")
        tool = name[:MAX_LABEL_LENGTH] if isinstance(name, str) else ""
    code: Any = None  # the JSON-RPC error code, checked below
    message: Any = ""
    outcome = OK
    if response is not None:
        error = response.get("error")
        if isinstance(error, dict):
            outcome, code, message = ERROR, error.get("code"), error.get("message")
        else:
            result = response.get("result")
            if isinstance(result, dict) and result.get("isError") is True:
                outcome, message = TOOL_ERROR, _first_text(result)
    target.record(tenant_id, method, tool, seconds, outcome)
    if outcome != OK:
        kind = "error" if outcome == ERROR else "tool_error"
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        entry = ErrorEntry(time.time(), kind, method, tool, code, str(message or "")[:500], params)
        target.remember_error(tenant_id, entry)


def _first_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                return block["text"][:500]
    return "isError result"


RECORDER = Recorder()


def recorder() -> Recorder:
    return RECORDER
