"""Flushing: increments from several processes add up, one statement per flush, errors kept bounded."""

from __future__ import annotations

import base64
import os
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.models import UsageBucket, UsageError
from mcp_app.usage import flush as usage_flush
from mcp_app.usage import queries
from mcp_app.usage.flush import Flusher
from mcp_app.usage.recorder import RECENT_ERRORS, Recorder, observe

OK = {"result": {"content": []}}


def calls(rec: Recorder, tenant_id: int, tool: str, n: int, ms: float, response: dict | None = None) -> None:
    for _ in range(n):
        observe(tenant_id, "tools/call", {"name": tool, "arguments": {}}, response or OK, ms / 1000, into=rec)


@pytest.mark.django_db(transaction=True)
def test_two_processes_flushing_the_same_minute_add_into_the_same_rows(tenant_a):
    one, two = Recorder("host:1"), Recorder("host:2")
    calls(one, tenant_a.id, "echo", 90, 3)  # fast
    calls(two, tenant_a.id, "echo", 10, 300)  # slow, on the other process
    calls(two, tenant_a.id, "echo", 2, 3, {"error": {"code": -32603, "message": "Internal error"}})
    Flusher(one).flush()
    Flusher(two).flush()
    calls(one, tenant_a.id, "echo", 8, 3)
    Flusher(one).flush()  # a second flush of the same minute adds again
    (row,) = UsageBucket.objects.filter(tenant=tenant_a)
    assert (row.method, row.tool, row.calls, row.errors) == ("tools/call", "echo", 110, 2)
    (echo,) = queries.by_tool(tenant_a.id, "hour")
    assert echo.totals.calls == 110
    assert echo.totals.p50 < 5 < 250 < echo.totals.p95 <= 500  # the slow tenth, from the other process


@pytest.mark.django_db(transaction=True)
def test_a_flush_writes_all_its_buckets_in_one_statement(tenant_a, tenant_b):
    rec = Recorder("p")
    for tool in ("a", "b", "c", "d"):
        calls(rec, tenant_a.id, tool, 25, 1)
        calls(rec, tenant_b.id, tool, 25, 1)
    with CaptureQueriesContext(connection) as captured:
        Flusher(rec).flush()
    table = UsageBucket._meta.db_table
    writes = [q["sql"] for q in captured.captured_queries if table in q["sql"] and "INSERT" in q["sql"]]
    assert len(writes) == 1
    assert UsageBucket.objects.count() == 8
    assert sum(UsageBucket.objects.values_list("calls", flat=True)) == 200


@pytest.mark.django_db(transaction=True)
def test_recent_errors_are_stored_redacted_truncated_and_only_the_newest_kept(tenant_a):
    rec = Recorder("p")
    params = {"name": "login", "arguments": {"user": "ann", "password": "hunter2", "note": "n" * 5000}}
    observe(
        tenant_a.id,
        "tools/call",
        params,
        {"result": {"isError": True, "content": [{"type": "text", "text": "denied"}]}},
        0.01,
        into=rec,
    )
    Flusher(rec).flush()
    (error,) = UsageError.objects.filter(tenant=tenant_a)
    assert (error.kind, error.method, error.tool, error.message) == (
        "tool_error",
        "tools/call",
        "login",
        "denied",
    )
    assert "hunter2" not in error.arguments and '"password": "***"' in error.arguments
    assert '"user": "ann"' in error.arguments and len(error.arguments) <= usage_flush.ARGUMENTS_CHARS
    for i in range(RECENT_ERRORS + 5):
        observe(tenant_a.id, "ping", None, {"error": {"code": -1, "message": f"e{i}"}}, 0.0, into=rec)
        if i % 20 == 0:
            Flusher(rec).flush()
    Flusher(rec).flush()
    kept = [e.message for e in queries.recent_errors(tenant_a.id)]
    assert len(kept) == RECENT_ERRORS
    assert kept[0] == f"e{RECENT_ERRORS + 4}"  # newest first


def test_opaque_request_state_and_blobs_are_shortened_to_their_size():
    """The dashboard's "Recent errors" shows what a person can read: no base64 requestState (AMB-234)."""
    state = base64.urlsafe_b64encode(os.urandom(600)).decode()
    image = base64.b64encode(os.urandom(300)).decode()
    params = {"name": "ask", "arguments": {"photo": image, "city": "Paris"}, "requestState": state}
    text = usage_flush.arguments_text(params)
    assert state not in text and state[:16] not in text
    assert f'"requestState": "<opaque, {len(state)} characters>"' in text
    assert image not in text and f"{image[:16]}… <opaque, {len(image)} characters>" in text
    assert '"city": "Paris"' in text


@pytest.mark.django_db(transaction=True)
def test_counts_of_a_tenant_deleted_before_the_flush_are_dropped_not_fatal(tenant_a, tenant_b):
    rec = Recorder("p")
    calls(rec, tenant_a.id, "echo", 1, 1)
    calls(rec, tenant_b.id, "echo", 1, 1, {"error": {"code": -1, "message": "x"}})
    tenant_b.delete()
    Flusher(rec).flush()
    assert list(UsageBucket.objects.values_list("tenant_id", flat=True)) == [tenant_a.id]
    assert not UsageError.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_failed_flush_keeps_its_counts_for_the_next_one(tenant_a, monkeypatch):
    rec = Recorder("p")
    calls(rec, tenant_a.id, "echo", 3, 1)

    def broken(rows):
        raise RuntimeError("database went away")

    monkeypatch.setattr(usage_flush, "_upsert", broken)
    with pytest.raises(RuntimeError):
        Flusher(rec).flush()
    monkeypatch.undo()
    Flusher(rec).flush()
    assert UsageBucket.objects.get(tenant=tenant_a).calls == 3


@pytest.mark.django_db(transaction=True)
def test_buckets_older_than_the_retention_are_pruned(tenant_a, settings):
    settings.MCP_USAGE_RETENTION_DAYS = 2
    now = time.time()
    minute = int(now // 60)
    for age_days in (0, 1, 3):
        UsageBucket.objects.create(tenant=tenant_a, minute=minute - age_days * 1440, method="ping", calls=1)
    assert usage_flush.prune(now) == 1
    assert sorted(UsageBucket.objects.values_list("minute", flat=True)) == [minute - 1440, minute]


@pytest.mark.django_db(transaction=True)
def test_the_chart_steps_cover_the_whole_window_with_empty_steps_as_zero(tenant_a):
    now = time.time()
    minute = int(now // 60)
    UsageBucket.objects.create(tenant=tenant_a, minute=minute, method="ping", calls=4, lat_01=4)
    UsageBucket.objects.create(
        tenant=tenant_a, minute=minute - 3 * 60, method="ping", calls=2, errors=1, lat_05=2
    )
    steps = queries.over_time(tenant_a.id, "day", now)
    assert len(steps) in (72, 73)  # 24 h in 20-minute steps, the first one partly covered
    assert sum(s.totals.calls for s in steps) == 6
    last = steps[-1].totals
    assert last.calls == 4 and last.error_rate == 0 and 5 < last.p50 <= 10
    assert [s.totals.calls for s in steps].count(0) == len(steps) - 2
