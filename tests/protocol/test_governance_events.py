"""Governance events (AMB-355): each use a policy denied, a guardrail blocked, redacted or audited, or a
quota throttled becomes an event of the tenant's, gathered in memory on the request path and written
in batches by the usage flush; never an argument or the text found; old ones pruned in batches. A
tenant keeps the share of a kind it samples (AMB-360)."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from mcp_app.governance import audit
from mcp_app.models import GovernanceEvent, Guardrail, Policy, Quota
from mcp_app.protocol import quotas
from mcp_app.usage import flush as usage_flush
from mcp_app.usage.flush import Flusher
from mcp_app.usage.recorder import Recorder
from tests.protocol.support import ctx_for, error_of, result_of
from tests.support import make_ctx

GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"


@pytest.fixture(autouse=True)
def clean() -> None:
    quotas.reset()
    audit.take()


def rules(tenant: Any) -> None:
    Policy.objects.create(
        tenant=tenant, name="no-add", effect="deny", applies_to="tools", condition="target.name == 'add'"
    )
    Policy.objects.create(tenant=tenant, name="no-secret-words", effect="deny", applies_to="tools",
                          condition="target.name == 'echo' && arguments.message == 'classified'")  # fmt: skip
    Guardrail.objects.create(
        tenant=tenant, name="keys", detector="secrets", where="arguments", action="block"
    )
    Guardrail.objects.create(tenant=tenant, name="mail", detector="email", where="results")
    Quota.objects.create(tenant=tenant, name="three", tool="echo", calls=3, window="hour")
    tenant.bump_version()


async def test_each_denial_block_redaction_and_throttle_is_an_event_written_by_the_flush(demo_a, demo_b):
    await sync_to_async(rules)(demo_a)
    ctx = await ctx_for(demo_a, "2026-07-28", session=None, user_id=None, client_address="192.0.2.9")

    def echo(message: str) -> dict[str, Any]:
        return {"name": "echo", "arguments": {"message": message}}

    assert (
        "Unknown tool"
        in (await error_of(ctx, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))["message"]
    )
    assert (await result_of(ctx, "tools/call", echo("classified")))["isError"]
    assert (await result_of(ctx, "tools/call", echo(GITHUB)))["isError"]
    for _ in range(3):
        await result_of(ctx, "tools/call", echo("a@example.com b@example.com"))
    assert "Quota three reached" in (await result_of(ctx, "tools/call", echo("x")))["content"][0]["text"]
    await result_of(await ctx_for(demo_b, "2026-07-28", session=None), "tools/list")  # nothing to say

    await sync_to_async(Flusher(Recorder("p")).flush)()
    rows = await sync_to_async(list)(
        GovernanceEvent.objects.order_by("id").values_list(
            "tenant_id", "kind", "rule", "target", "method", "caller", "detail"
        )
    )
    caller = "address:192.0.2.9"
    redacted = (
        demo_a.id,
        "redacted",
        "mail",
        "echo",
        "tools/call",
        caller,
        {"found": "e-mail address", "count": 4, "in": "result"},  # two in the text, two in structuredContent
    )
    assert rows[:3] == [
        (demo_a.id, "denied", "no-add", "add", "tools/call", caller, {"hidden": True}),
        (demo_a.id, "denied", "no-secret-words", "echo", "tools/call", caller, {"hidden": False}),
        (
            demo_a.id,
            "blocked",
            "keys",
            "echo",
            "tools/call",
            caller,
            {"found": "GitHub Token", "count": 1, "in": "arguments"},
        ),
    ]
    assert rows[3:6] == [redacted] * 3
    assert rows[6][:6] == (demo_a.id, "throttled", "three", "echo", "tools/call", caller)
    assert len(rows) == 7 and GITHUB not in str(rows) and "example.com" not in str(rows)


def test_events_past_what_one_flush_holds_are_counted_as_dropped(demo_a, caplog, monkeypatch) -> None:
    monkeypatch.setattr(audit, "MAX_PENDING", 3)
    ctx = type("C", (), {"tenant": type("T", (), {"id": demo_a.id, "audit_sampling": ()}), "client_id": None,
                         "subject": None, "user_id": 1, "client_address": None})  # fmt: skip
    for _ in range(5):
        audit.record(ctx, "denied", "p", "t", "tools/call")
    Flusher(Recorder("p")).flush()
    assert GovernanceEvent.objects.count() == 3
    assert "2 governance events dropped" in caplog.text


def test_a_tenant_keeps_the_share_of_a_kind_it_samples_and_each_kept_event_says_so(demo_a) -> None:
    demo_a.audit_sampling = {"audited": 10, "throttled": 100}
    demo_a.full_clean()
    demo_a.save()
    ctx = make_ctx(demo_a, client_address="10.0.0.1")
    audit.take()
    random.seed(7)
    for _ in range(2_000):
        audit.record(ctx, "audited", "greetings", "echo", "tools/call", {"found": "a match"})
    for _ in range(20):
        audit.record(ctx, "denied", "p", "echo", "tools/call")
        audit.record(ctx, "throttled", "q", "echo", "tools/call")
    events, _ = audit.take()
    audited = [e for e in events if e.kind == "audited"]
    assert 140 <= len(audited) <= 260, len(audited)  # about one in ten
    assert all(e.detail == {"found": "a match", "sampled_percent": 10} for e in audited)
    # A kind not named keeps every event; one named at 100 does too, and says so.
    assert sum(e.kind == "denied" and "sampled_percent" not in e.detail for e in events) == 20
    assert sum(e.kind == "throttled" and e.detail == {"sampled_percent": 100} for e in events) == 20


@pytest.mark.parametrize(
    ("sampling", "says"),
    [([10], "A JSON object"), ({"audit": 10}, "'audit' is not a kind"), ({"audited": 0}, "from 1 to 100"),
     ({"audited": 50.5}, "from 1 to 100"), ({"denied": True}, "from 1 to 100")],
)  # fmt: skip
def test_a_sampling_that_is_not_a_kind_and_a_whole_percent_is_refused(demo_a, sampling, says) -> None:
    demo_a.audit_sampling = sampling
    with pytest.raises(ValidationError, match=says):
        demo_a.full_clean()


@pytest.mark.django_db(transaction=True)
def test_events_older_than_their_days_are_pruned_in_batches(tenant_a, settings) -> None:
    settings.MCP_GOVERNANCE_EVENT_DAYS = 2
    now = datetime.now(UTC)
    GovernanceEvent.objects.bulk_create(
        GovernanceEvent(tenant=tenant_a, created_at=now - timedelta(days=age), kind="denied")
        for age in (0, 1, 3, 3, 3, 5)
    )
    assert usage_flush.prune_governance(time.time(), batch=2) == 4
    assert GovernanceEvent.objects.count() == 2
