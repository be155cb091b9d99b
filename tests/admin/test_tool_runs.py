"""The background runs page: members read their tenant's runs, nobody edits them, other tenants see nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse
from django.utils import timezone

from mcp_app.background import contract, runs
from mcp_app.infra import redis_client
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


@pytest.fixture
def running(tenant_a, tool_a) -> ToolRun:
    return ToolRun.objects.create(
        job_id=f"job-running-{tenant_a.pk}",
        tenant=tenant_a,
        tool=tool_a,
        tool_name=tool_a.name,
        status="running",
        started_at=timezone.now(),
        arguments={"n": 5},
        exchanges=[
            {
                "asked": {"method": "elicitation/create", "params": {"message": "Go on?"}},
                "answer": {"action": "accept"},
                "at": "2026-11-25T07:00:00+00:00",
            }
        ],
    )


def test_a_run_page_shows_its_arguments_result_and_the_questions_it_asked(client, alice, run_a, running):
    ToolRun.objects.filter(pk=run_a.pk).update(
        arguments={"city": "Oslo"}, result={"content": [{"type": "text", "text": "Rain"}], "isError": True}
    )
    client.force_login(alice)
    finished = client.get(reverse("admin:mcp_app_toolrun_change", args=[run_a.pk])).content.decode()
    assert "&quot;city&quot;: &quot;Oslo&quot;" in finished and "Rain" in finished
    assert 'id="run-cancel"' not in finished  # it ended: nothing to cancel
    live = client.get(reverse("admin:mcp_app_toolrun_change", args=[running.pk])).content.decode()
    assert "elicitation/create" in live and "Go on?" in live and "&quot;accept&quot;" in live
    assert 'data-active="1"' in live and 'id="run-cancel"' in live


def test_the_live_view_gives_a_runs_status_and_answers_404_for_another_tenants(client, bob, running, run_b):
    client.force_login(bob)
    live = client.get(reverse("admin:mcp_app_toolrun_live", args=[running.pk])).json()
    assert live["status"] == "running" and live["active"] is True and live["ran"].endswith("so far")
    assert client.get(reverse("admin:mcp_app_toolrun_live", args=[run_b.pk])).status_code == 404


def test_a_viewer_cannot_cancel_a_run_and_sees_no_button(client, bob, running):
    client.force_login(bob)
    page = client.get(reverse("admin:mcp_app_toolrun_change", args=[running.pk])).content.decode()
    assert 'id="run-cancel"' not in page
    assert client.post(reverse("admin:mcp_app_toolrun_cancel", args=[running.pk])).status_code == 403


@pytest.mark.services(reason="the cancellation travels to the worker through Redis")
def test_an_editor_cancels_a_running_run_and_its_worker_is_told_who(client, alice, running, settings):
    client.force_login(alice)
    response = client.post(reverse("admin:mcp_app_toolrun_cancel", args=[running.pk]), follow=True)
    assert "Cancellation sent" in response.content.decode()
    value = redis_client.sync_client().get(contract.cancel_key(running.job_id))
    assert contract.admin_canceller(value) == "alice"


@pytest.mark.services(reason="progress is kept in Redis")
async def test_the_live_view_shows_the_latest_progress_the_server_relayed(running):
    await runs.note_progress(
        running.job_id, {"progress": 3, "total": 5, "message": "three", "progressToken": 1}
    )
    assert await sync_to_async(runs.progress_of)(running.job_id) == {
        "progress": 3,
        "total": 5,
        "message": "three",
    }
