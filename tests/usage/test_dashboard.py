"""The dashboard pages per role: members see their tenant's usage, others the 404 of a missing tenant."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from mcp_app.models import ToolRun, UsageBucket, UsageError
from mcp_app.usage.flush import Flusher
from mcp_app.usage.recorder import Recorder, observe

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage_a(tenant_a):
    """Tenant A's last hour: echo called 30 times (3 isError, 1 JSON-RPC error), tools/list 5 times."""
    rec = Recorder("p")
    for i in range(30):
        result = {"result": {"isError": i < 3, "content": [{"type": "text", "text": "echo broke"}]}}
        observe(tenant_a.id, "tools/call", {"name": "echo", "arguments": {"m": i}}, result, 0.004, into=rec)
    observe(
        tenant_a.id,
        "tools/call",
        {"name": "echo"},
        {"error": {"code": -32602, "message": "bad args"}},
        0.2,
        into=rec,
    )
    for _ in range(5):
        observe(tenant_a.id, "tools/list", {}, {"result": {}}, 0.001, into=rec)
    Flusher(rec).flush()
    return tenant_a


def dashboard_url(slug: str = "tenant-a", **query: str) -> str:
    url = reverse("tenant-dashboard", args=[slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_the_owner_sees_calls_per_tool_errors_latency_charts_and_recent_errors(client, alice, usage_a):
    client.force_login(alice)
    response = client.get(dashboard_url())
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('<svg class="chart"') == 4
    assert 'data-name="p95"' in page and 'data-name="calls"' in page
    assert "<b>36</b>requests" in page and "<b>4</b>errors" in page
    assert "bad args" in page and "echo broke" in page
    assert "&quot;m&quot;: " in page  # the failed request's arguments
    assert reverse("admin:tenants_tenant_change", args=[usage_a.pk]) in page
    assert reverse("usage-overview") not in page  # the all-tenants page is a superuser's


def test_a_viewer_sees_the_dashboard_of_the_tenant_they_belong_to(client, bob, usage_a):
    client.force_login(bob)
    assert client.get(dashboard_url(window="week")).status_code == 200


def test_charlie_gets_for_tenant_a_exactly_what_a_missing_tenant_gets(client, charlie, usage_a):
    client.force_login(charlie)
    theirs = client.get(dashboard_url())
    missing = client.get(dashboard_url("no-such-tenant"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.content == missing.content
    assert "echo" not in theirs.content.decode()
    assert client.get(dashboard_url("tenant-b")).status_code == 200  # their own


def test_a_signed_out_visitor_is_sent_to_sign_in(client, usage_a):
    response = client.get(dashboard_url())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_an_unknown_window_is_a_clear_400(client, alice, usage_a):
    client.force_login(alice)
    response = client.get(dashboard_url(window="year"))
    assert response.status_code == 400
    assert b"hour, day, week" in response.content


@pytest.mark.parametrize("window", ["hour", "day", "week"])
def test_every_window_draws_its_charts(client, alice, usage_a, window):
    client.force_login(alice)
    page = client.get(dashboard_url(window=window)).content.decode()
    assert page.count('<svg class="chart"') == 4 and 'aria-current="page">last ' + window in page


def test_a_tool_name_is_escaped_in_the_charts_and_the_table(client, alice, tenant_a):
    rec = Recorder("p")
    observe(tenant_a.id, "tools/call", {"name": "<script>x</script>"}, {"result": {}}, 0.001, into=rec)
    Flusher(rec).flush()
    client.force_login(alice)
    page = client.get(dashboard_url()).content.decode()
    assert "<script>x" not in page and "&lt;script&gt;x" in page


def test_background_runs_of_the_window_show_with_their_run_times(client, alice, tenant_a):
    from django.utils import timezone  # noqa: PLC0415 - only this test builds run rows

    now = timezone.now()
    for ms in (100, 300):
        ToolRun.objects.create(
            job_id=f"j{ms}",
            tenant=tenant_a,
            tool_name="slow",
            status="done",
            started_at=now,
            finished_at=now + timezone.timedelta(milliseconds=ms),
        )
    client.force_login(alice)
    page = client.get(dashboard_url()).content.decode()
    assert "done: 2" in page and "p95 300 ms" in page


def test_a_superuser_sees_every_tenant_in_the_overview_and_others_get_404(
    client, django_user_model, alice, charlie, usage_a, tenant_b
):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw-123")
    client.force_login(root)
    page = client.get(reverse("usage-overview")).content.decode()
    assert "tenant-a" in page and "tenant-b" in page and '<svg class="chart"' in page
    assert client.get(dashboard_url("tenant-b")).status_code == 200
    assert reverse("usage-overview") in client.get(dashboard_url()).content.decode()
    for member in (alice, charlie):
        client.force_login(member)
        assert client.get(reverse("usage-overview")).status_code == 404


def test_the_tenant_admin_page_links_the_dashboard(client, alice, tenant_a):
    client.force_login(alice)
    page = client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).content.decode()
    assert f'href="{dashboard_url()}"' in page


def test_buckets_outside_the_window_are_not_counted(client, alice, tenant_a):
    minute = int(time.time() // 60)
    UsageBucket.objects.create(tenant=tenant_a, minute=minute - 2 * 60, method="ping", calls=7, lat_00=7)
    UsageError.objects.create(
        tenant=tenant_a, at="2026-01-01T00:00:00Z", kind="error", method="ping", message="old"
    )
    client.force_login(alice)
    assert "<b>0</b>requests" in client.get(dashboard_url(window="hour")).content.decode()
    assert "<b>7</b>requests" in client.get(dashboard_url(window="day")).content.decode()
