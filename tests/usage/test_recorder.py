"""The in-memory recorder: aggregation per tenant, minute, method and tool; outcomes; percentiles; caps."""

from __future__ import annotations

import pytest

from mcp_app.models import LATENCY_BOUNDS_MS
from mcp_app.usage import recorder as usage
from mcp_app.usage.recorder import Recorder, observe, percentile

CALL = {"name": "echo", "arguments": {"message": "hi"}}


def histogram(**slots: int) -> list[int]:
    counts = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    for index, n in slots.items():
        counts[int(index[1:])] = n
    return counts


def test_calls_of_one_tool_in_one_minute_add_up_in_one_bucket():
    rec = Recorder("p1")
    for ms in (3, 7, 7, 40):
        observe(1, "tools/call", CALL, {"result": {"content": []}}, ms / 1000, into=rec)
    observe(1, "tools/list", {}, {"result": {"tools": []}}, 0.001, into=rec)
    observe(2, "tools/call", CALL, {"result": {}}, 0.001, into=rec)
    pending, errors = rec.take()
    assert errors == {}
    by_label = {(k[0], k[2], k[3]): c for k, c in pending.items()}
    assert set(by_label) == {(1, "tools/call", "echo"), (1, "tools/list", ""), (2, "tools/call", "echo")}
    echo = by_label[(1, "tools/call", "echo")]
    assert echo.calls == 4 and echo.errors == 0 and echo.tool_errors == 0
    assert echo.histogram[:4] == [1, 2, 0, 1]  # <=5, <=10, <=25, <=50 ms
    assert echo.duration_ms == pytest.approx(57)
    assert rec.take() == ({}, {})  # taken once


def test_a_jsonrpc_error_and_an_iserror_result_are_counted_apart_and_remembered():
    rec = Recorder("p1")
    observe(
        1, "tools/call", CALL, {"error": {"code": -32602, "message": "Unknown tool: nope"}}, 0.002, into=rec
    )
    observe(
        1,
        "tools/call",
        CALL,
        {"result": {"isError": True, "content": [{"type": "text", "text": "boom"}]}},
        0.002,
        into=rec,
    )
    observe(1, "tools/call", CALL, {"result": {"isError": False}}, 0.002, into=rec)
    pending, errors = rec.take()
    (counts,) = pending.values()
    assert (counts.calls, counts.errors, counts.tool_errors) == (3, 1, 1)
    first, second = errors[1]
    assert (first.kind, first.code, first.message, first.tool) == (
        "error",
        -32602,
        "Unknown tool: nope",
        "echo",
    )
    assert (second.kind, second.code, second.message) == ("tool_error", None, "boom")
    assert second.params is CALL  # serialized at flush, not on the request path


def test_only_the_newest_errors_of_a_tenant_are_kept_in_memory():
    rec = Recorder("p1")
    for i in range(usage.RECENT_ERRORS + 20):
        observe(1, "ping", {"i": i}, {"error": {"code": -1, "message": str(i)}}, 0.0, into=rec)
    _pending, errors = rec.take()
    assert len(errors[1]) == usage.RECENT_ERRORS
    assert errors[1][-1].message == str(usage.RECENT_ERRORS + 19)


def test_tool_names_past_the_cap_are_counted_as_other(monkeypatch):
    monkeypatch.setattr(usage, "MAX_LABELS_PER_TENANT", 3)
    rec = Recorder("p1")
    for name in ("a", "b", "c", "d", "e", "a"):
        observe(1, "tools/call", {"name": name}, {"result": {}}, 0.0, into=rec)
    pending, _ = rec.take()
    calls = {k[3]: c.calls for k, c in pending.items()}
    assert calls == {"a": 2, "b": 1, "c": 1, usage.OTHER: 2}


def test_a_very_long_tool_name_is_cut_to_the_column_width():
    rec = Recorder("p1")
    observe(1, "tools/call", {"name": "x" * 500}, {"result": {}}, 0.0, into=rec)
    pending, _ = rec.take()
    assert [len(k[3]) for k in pending] == [usage.MAX_LABEL_LENGTH]


def test_percentiles_interpolate_inside_the_bucket_that_holds_the_rank():
    assert percentile(histogram(), 0.5) is None
    # 10 calls in (10, 25] ms: the median is half way through that bucket.
    assert percentile(histogram(h02=10), 0.5) == pytest.approx(17.5)
    # 90 fast calls (<=5 ms), 10 slow ones in (250, 500]: p50 is fast, p95 lands among the slow.
    mixed = histogram(h00=90, h06=10)
    assert percentile(mixed, 0.5) < 5
    assert percentile(mixed, 0.95) == pytest.approx(250 + 250 * 0.5)
    # Past the last bound there is no upper edge: reported as that bound.
    assert percentile(histogram(h12=3), 0.95) == LATENCY_BOUNDS_MS[-1]


def test_what_a_failed_flush_gives_back_is_written_by_the_next_one():
    rec = Recorder("p1")
    observe(1, "ping", {}, {"error": {"code": -1, "message": "x"}}, 0.0, into=rec)
    pending, errors = rec.take()
    observe(1, "ping", {}, {"result": {}}, 0.0, into=rec)
    rec.give_back(pending, errors)
    again, errors_again = rec.take()
    assert sum(c.calls for c in again.values()) == 2
    assert [e.message for e in errors_again[1]] == ["x"]


def test_process_totals_accumulate_across_flushes_for_an_exporter():
    rec = Recorder("p1")
    observe(1, "ping", {}, {"result": {}}, 0.0, into=rec)
    rec.take()
    observe(1, "ping", {}, {"result": {}}, 0.0, into=rec)
    rec.take()
    assert rec.totals()[(1, "ping", "")].calls == 2


def test_listeners_are_counted_per_tenant_and_never_below_zero():
    rec = Recorder("p1")
    rec.listener_opened(1)
    rec.listener_opened(1)
    rec.listener_closed(1)
    rec.listener_closed(2)
    assert rec.listeners == {1: 1}
    rec.listener_closed(1)
    assert rec.listeners == {}
