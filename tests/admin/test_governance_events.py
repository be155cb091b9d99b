"""Governance events in the admin (AMB-355): each tenant's to its owners only, read-only, exported as
JSON lines with the list's filters."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from mcp_app.admin import governance_events
from mcp_app.models import GovernanceEvent

pytestmark = pytest.mark.django_db
LIST = "/admin/mcp_app/governanceevent/"


@pytest.fixture
def events(tenant_a, tenant_b) -> None:
    now = datetime.now(UTC)
    GovernanceEvent.objects.create(tenant=tenant_a, created_at=now, kind="blocked", rule="keys", target="echo",
                                   method="tools/call", caller="user:1", detail={"found": "GitHub Token", "count": 1})  # fmt: skip
    GovernanceEvent.objects.create(
        tenant=tenant_a, created_at=now, kind="throttled", rule="three", target="echo"
    )
    GovernanceEvent.objects.create(
        tenant=tenant_b, created_at=now, kind="denied", rule="b-rule", target="b-tool"
    )


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def lines(response) -> list[dict]:
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_an_owner_reads_and_exports_her_tenants_events_and_nobody_changes_them(alice, bob, charlie, events):
    page = browser(alice).get(LIST).content.decode()
    assert "keys" in page and "b-rule" not in page
    exported = browser(alice).get(f"{LIST}export/?kind__exact=blocked")
    assert exported["Content-Type"] == "application/jsonl"
    assert [(e["tenant"], e["kind"], e["rule"], e["detail"]) for e in lines(exported)] == [
        ("tenant-a", "blocked", "keys", {"found": "GitHub Token", "count": 1})
    ]
    assert [e["rule"] for e in lines(browser(charlie).get(f"{LIST}export/"))] == ["b-rule"]
    assert browser(bob).get(LIST).status_code == 403  # a viewer of tenant A
    assert browser(alice).get(f"{LIST}add/").status_code == 403
    event = GovernanceEvent.objects.get(rule="keys")
    assert browser(alice).post(f"{LIST}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert GovernanceEvent.objects.count() == 3


def test_the_list_counts_no_further_than_its_cap_and_filters_by_fixed_choices(alice, tenant_a, monkeypatch):
    monkeypatch.setattr(governance_events, "COUNT_CAP", 5)
    now = datetime.now(UTC)
    GovernanceEvent.objects.bulk_create(
        GovernanceEvent(tenant=tenant_a, created_at=now, kind="denied", rule=f"r{i}", target="echo",
                        method="tools/call" if i % 2 else "prompts/get")
        for i in range(12)
    )  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        page = browser(alice).get(LIST).content.decode()
    assert "6 governance events" in page  # "more than 5": counted to the cap and one more
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts), counts
    distinct = [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"].upper()]
    assert not distinct, distinct
    filtered = browser(alice).get(f"{LIST}?method=prompts/get&created_at__gte={now.date().isoformat()}")
    assert filtered.status_code == 200 and filtered.content.decode().count("prompts/get</td>") == 6


def test_the_tenant_filter_offers_the_tenants_one_owns_and_filters_by_one(alice, charlie, events, tenant_a):
    page = browser(alice).get(LIST).content.decode()
    assert "tenant-a" in page and "tenant-b" not in page
    theirs = browser(charlie).get(f"{LIST}?tenant__id__exact={tenant_a.pk}")
    assert "keys" not in theirs.content.decode()  # another tenant's id: nothing of it
    assert browser(alice).get(f"{LIST}?tenant__id__exact=x").status_code in (200, 302)
