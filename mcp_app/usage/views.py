"""The usage dashboard of a tenant (its members and superusers) and the all-tenants overview (superusers).

Anyone else gets the 404 of a missing tenant (tenants.access), and a signed-out visitor the sign-in.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse, reverse_lazy

from mcp_app.usage import charts, queries
from tenants import access
from tenants.models import Tenant

SIGN_IN = reverse_lazy("admin:login")
TIME_FORMATS = {"hour": "%H:%M", "day": "%H:%M", "week": "%a %H:%M"}


def _window(request: HttpRequest) -> str | None:
    window = request.GET.get("window", "hour")
    return window if window in queries.WINDOWS else None


def _bad_window() -> HttpResponse:
    choices = ", ".join(queries.WINDOWS)
    return HttpResponseBadRequest(f"Unknown window: choose one of {choices}.", content_type="text/plain")


@login_required(login_url=SIGN_IN)
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = access.access_tenant(request.user, slug)
    window = _window(request)
    if window is None:
        return _bad_window()
    steps = queries.over_time(tenant.id, window)
    rows = queries.by_tool(tenant.id, window)
    times = [s.start for s in steps]
    fmt = TIME_FORMATS[window]
    calls = sum(r.totals.calls for r in rows)
    failed = sum(r.totals.failed for r in rows)
    tool_rows = [r for r in rows if r.method == "tools/call"]
    sessions, listeners = queries.live_counts([tenant.id])
    context = {
        "tenant": tenant,
        "window": window,
        "windows": list(queries.WINDOWS),
        "rows": rows,
        "calls": calls,
        "failed": failed,
        "error_rate": failed / calls if calls else None,
        "sessions": sessions[tenant.id],
        "listeners": listeners[tenant.id],
        "errors": queries.recent_errors(tenant.id),
        "runs": queries.background_runs(tenant.id, window),
        "is_superuser": request.user.is_superuser,
        "calls_per_tool": charts.bar_chart(
            "Calls per tool", [(r.tool, float(r.totals.calls)) for r in tool_rows[:15]], charts.count
        ),
        "calls_chart": charts.line_chart(
            "Calls and errors",
            times,
            [
                ("calls", [float(s.totals.calls) for s in steps]),
                ("errors", [float(s.totals.failed) for s in steps]),
            ],
            charts.count,
            fmt,
        ),
        "error_chart": charts.line_chart(
            "Error rate", times, [("error rate", [s.totals.error_rate for s in steps])], charts.percent, fmt
        ),
        "latency_chart": charts.line_chart(
            "Latency",
            times,
            [("p50", [s.totals.p50 for s in steps]), ("p95", [s.totals.p95 for s in steps])],
            charts.millis,
            fmt,
        ),
        "admin_url": reverse("admin:tenants_tenant_change", args=[tenant.pk]),
    }
    return render(request, "usage/dashboard.html", context)


@login_required(login_url=SIGN_IN)
def overview(request: HttpRequest) -> HttpResponse:
    if access.roles_of(request.user) is not None:  # not a superuser: no such page
        raise Http404("No such page.")
    window = _window(request)
    if window is None:
        return _bad_window()
    tenants = list(Tenant.objects.order_by("slug"))
    totals = queries.per_tenant(window)
    ids = [t.id for t in tenants]
    sessions, listeners = queries.live_counts(ids)
    rows: list[dict[str, Any]] = [
        {
            "tenant": t,
            "totals": totals.get(t.id, queries.Totals()),
            "sessions": sessions[t.id],
            "listeners": listeners[t.id],
        }
        for t in tenants
    ]
    rows.sort(key=lambda r: (-r["totals"].calls, r["tenant"].slug))
    chart = charts.bar_chart(
        "Calls per tenant",
        [(r["tenant"].slug, float(r["totals"].calls)) for r in rows if r["totals"].calls][:20],
        charts.count,
    )
    context = {"rows": rows, "window": window, "windows": list(queries.WINDOWS), "chart": chart}
    return render(request, "usage/overview.html", context)
