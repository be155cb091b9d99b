"""The background runs page: members read their tenant's runs, nobody edits them, other tenants see nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from mcp_app.background import runs
from mcp_app.models import ToolRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_a(tenant_a, tool_a) -> ToolRun:
    run = ToolRun.objects.create(
        job_id="job-a",
        tenant=tenant_a,
        tool=tool_a,
        tool_name=tool_a.name,
        status="failed",
        detail="upstream 502",
    )
    started = run.queued_at + timedelta(seconds=1.5)
    ToolRun.objects.filter(pk=run.pk).update(started_at=started, finished_at=started + timedelta(seconds=4))
    run.refresh_from_db()
    return run


@pytest.fixture
def run_b(tenant_b) -> ToolRun:
    return ToolRun.objects.create(job_id="job-b", tenant=tenant_b, tool_name="b_tool", status="queued")


def test_a_member_lists_their_tenants_runs_with_wait_and_duration(client, bob, run_a, run_b):
    client.force_login(bob)
    response = client.get(reverse("admin:mcp_app_toolrun_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    assert run_a.tool_name in html and "b_tool" not in html
    assert "1.50 s" in html and "4.00 s" in html


def test_a_run_page_is_read_only_even_for_the_owner(client, alice, run_a):
    client.force_login(alice)
    page = client.get(reverse("admin:mcp_app_toolrun_change", args=[run_a.pk]))
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert "upstream 502" in page.content.decode()
    assert client.get(reverse("admin:mcp_app_toolrun_add")).status_code == 403
    assert (
        client.post(reverse("admin:mcp_app_toolrun_delete", args=[run_a.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert ToolRun.objects.filter(pk=run_a.pk).exists()


def test_another_tenants_run_is_a_404(client, charlie, run_a):
    client.force_login(charlie)
    assert client.get(reverse("admin:mcp_app_toolrun_change", args=[run_a.pk])).status_code == 404


def test_runs_older_than_the_retention_are_purged_when_a_run_is_recorded(
    settings, tenant_a, tool_a, monkeypatch
):

    settings.MCP_TOOL_RUN_RETENTION_DAYS = 30
    old = ToolRun.objects.create(job_id="old", tenant=tenant_a, tool_name="x", status="done")
    ToolRun.objects.filter(pk=old.pk).update(queued_at=timezone.now() - timedelta(days=31))
    recent = ToolRun.objects.create(job_id="recent", tenant=tenant_a, tool_name="x", status="done")
    monkeypatch.setattr(runs, "_last_purge", None)
    job = {"id": "new", "tenant_id": tenant_a.id, "tool_id": tool_a.id, "tool_name": tool_a.name}
    runs.record_queued(job)
    assert set(ToolRun.objects.values_list("job_id", flat=True)) == {"recent", "new"}
    assert recent.pk in ToolRun.objects.values_list("pk", flat=True)
