"""A tenant's own quotas (AMB-352, models/quotas.py counted by protocol/quotas.py): calls of a tool or
of every tool per minute, hour or day, per caller or for everyone; past one, `isError: true` naming it."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from mcp_app import catalog as catalogs
from mcp_app.infra import redis_client
from mcp_app.models import Policy, Quota, Tool
from mcp_app.protocol import quotas
from tenants.models import Tenant
from tests.protocol.support import result_of
from tests.support import make_ctx

ECHO = {"name": "echo", "arguments": {"message": "x"}}
OTHER = {"name": "echo2", "arguments": {"message": "x"}}
HOUR = 3600


@pytest.fixture
def tenant(transactional_db, tenant_a) -> Tenant:
    for name in ("echo", "echo2"):
        Tool.objects.create(
            tenant=tenant_a, name=name, handler="template", handler_config={"text": "ok"},
            input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        )  # fmt: skip
    if redis_client.enabled():  # tenant ids repeat across tests: start from empty counters
        keys = redis_client.sync_client().keys(f"mcp:quota:{tenant_a.id}:*")
        if keys:
            redis_client.sync_client().delete(*keys)
    quotas.reset()
    return tenant_a


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """Five minutes into an hour: the hour's window runs 55 more minutes."""
    now = [(int(time.time()) // HOUR) * HOUR + 300.0]
    monkeypatch.setattr(quotas, "time", type("T", (), {"time": staticmethod(lambda: now[0])}))
    return now


def quota(tenant: Tenant, **fields: Any) -> Quota:
    row = Quota(tenant=tenant, **{"name": "q", "calls": 2, "window": "hour", "per": "caller", **fields})
    row.full_clean()
    row.save()
    return row


def ctx(tenant: Tenant, **kwargs: Any) -> Any:
    kwargs.setdefault("session", None)
    return make_ctx(tenant, version=kwargs.pop("version", "2026-07-28"), **kwargs)


async def reached(context: Any, params: dict[str, Any]) -> str:
    """The call's result is a tool error (not a JSON-RPC one): its text."""
    result = await result_of(context, "tools/call", params)
    assert result["isError"] is True, result
    return result["content"][0]["text"]


async def test_past_a_quota_the_call_answers_a_tool_error_naming_it_and_the_seconds_left(tenant, clock):
    await sync_to_async(quota)(tenant, name="two-an-hour", tool="echo")
    for _ in range(2):
        assert not (await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)).get("isError")
    text = await reached(ctx(tenant, user_id=1), ECHO)
    assert text == (
        "Quota two-an-hour reached: at most 2 calls per hour of the tool echo for you. Retry in 3300.0 s."
    )
    await result_of(ctx(tenant, user_id=1), "tools/call", OTHER)  # another tool: not counted
    await result_of(ctx(tenant, user_id=2), "tools/call", ECHO)  # another caller: a window of its own
    assert quotas.refusals()["quota"] >= 1


async def test_a_caller_is_who_it_is_not_its_session_so_a_new_session_does_not_reset_it(tenant, clock):
    await sync_to_async(quota)(tenant, tool="echo", calls=1)
    legacy = {"version": "2025-11-25", "client_address": "10.0.0.7"}
    await result_of(ctx(tenant, session=True, **legacy), "tools/call", ECHO)
    # A re-initialize is a new session of the same address; a 2026-07-28 request has none at all.
    await reached(ctx(tenant, session=True, **legacy), ECHO)
    await reached(ctx(tenant, client_address="10.0.0.7"), ECHO)
    await result_of(ctx(tenant, client_address="10.0.0.8"), "tools/call", ECHO)


async def test_an_api_key_a_subject_and_a_client_are_each_a_caller_of_their_own(tenant, clock):
    await sync_to_async(quota)(tenant, calls=1)
    await result_of(ctx(tenant, user_id=1, client_id="api-key:5"), "tools/call", ECHO)
    await reached(ctx(tenant, user_id=1, client_id="api-key:5"), OTHER)
    await result_of(ctx(tenant, user_id=1, client_id="api-key:6"), "tools/call", ECHO)  # the user's other key
    await result_of(ctx(tenant, subject="alice@idp"), "tools/call", ECHO)
    await reached(ctx(tenant, subject="alice@idp", client_id="other"), ECHO)
    await result_of(ctx(tenant, client_id="app"), "tools/call", ECHO)
    await result_of(ctx(tenant, subject="x" * 400), "tools/call", ECHO)  # a long one, hashed
    await reached(ctx(tenant, subject="x" * 400), ECHO)


async def test_a_quota_for_the_tenant_counts_every_caller_and_every_tool_together(tenant, clock):
    await sync_to_async(quota)(tenant, per="tenant", calls=3, window="day")
    for i, params in enumerate((ECHO, OTHER, ECHO)):
        await result_of(ctx(tenant, user_id=i), "tools/call", params)
    text = await reached(ctx(tenant, user_id=9), OTHER)
    assert "at most 3 calls per day (UTC) of this server's tools for everyone together" in text


async def test_a_malformed_or_denied_call_spends_nothing(tenant, clock):
    await sync_to_async(quota)(tenant, tool="echo", calls=1)
    await sync_to_async(Policy.objects.create)(
        tenant=tenant, name="no-secrets", effect="deny", condition='arguments.message == "secret"'
    )
    for _ in range(3):
        bad = await result_of(ctx(tenant, user_id=1), "tools/call", {"name": "echo", "arguments": {"message": 5}})
        assert bad["isError"] and "Quota" not in bad["content"][0]["text"]
        denied = await reached(ctx(tenant, user_id=1), {"name": "echo", "arguments": {"message": "secret"}})
        assert "no-secrets" in denied
    await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)
    await reached(ctx(tenant, user_id=1), ECHO)


async def test_the_next_window_starts_a_new_count_and_a_change_reaches_the_catalog(tenant, clock):
    row = await sync_to_async(quota)(tenant, tool="echo", calls=1, window="minute")
    await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)
    assert "Retry in 60.0 s." in await reached(ctx(tenant, user_id=1), ECHO)
    clock[0] += 60
    await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)
    row.enabled = False
    await sync_to_async(row.save)()
    assert (await catalogs.get_catalog(tenant.id)).quotas == ()
    for _ in range(3):
        await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)


def test_a_quota_is_checked_when_saved(tenant):
    with pytest.raises(ValidationError) as no_tool:
        quota(tenant, tool="no_such_tool")
    assert "no tool named 'no_such_tool'" in str(no_tool.value)
    for bad in ({"calls": 0}, {"calls": 10_000_001}, {"window": "week"}, {"per": "session"}, {"name": "a b"}):
        with pytest.raises(ValidationError):
            quota(tenant, **{"name": "x", **bad})
    assert not Quota.objects.filter(tenant=tenant).exists()


@pytest.mark.services
async def test_with_redis_every_process_counts_against_one_window(tenant, clock, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    await sync_to_async(quota)(tenant, tool="echo", calls=25)
    admitted = 0
    for i in range(40):
        if i % 8 == 0:
            quotas.reset()  # "another process": a fresh allowance, the same Redis counter
        admitted += not (await result_of(ctx(tenant, user_id=1), "tools/call", ECHO)).get("isError")
    assert admitted <= 25  # never more than the quota, across processes
    assert admitted >= 25 - 4 * 2  # at most a batch (2 of 25) lost by each process that moved on
