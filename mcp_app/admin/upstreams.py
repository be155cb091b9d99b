"""The admin of upstream MCP servers: add and edit (secret headers write-only), Test connection, Sync
now and Publish all (on the upstream's page and its remote tools page), the remote tools page (publish
one, the selected or all, unpublish, review a changed definition and accept it; AMB-292), the upstreams
list's action publishing every remote tool of the selected upstreams, and the prompts and resources
page (what is published under which name or URI, a held change and Accept).

Every page is the upstream's: another tenant's upstream answers 404 like a missing one, a viewer sees
but changes nothing (403), and every change is a CSRF-checked POST that goes through
mcp_app/upstreams/service.py (full_clean + save: history, audit, version bump, list_changed).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from mcp_app import federation
from mcp_app.admin import upstream_publishing, upstream_registry
from mcp_app.admin.upstream_forms import PublishForm, UpstreamAdminForm
from mcp_app.catalog.apart import Unfinished, run_apart
from mcp_app.federation import breaker, call_stats
from mcp_app.handlers.secrets import secret_names
from mcp_app.models import Upstream, UpstreamTool
from mcp_app.upstreams import deployment_health, extras_review, service
from tenants.admin import TenantScopedAdmin

# How the breaker's state (per serving process, AMB-159) reads on the upstream's pages.
CIRCUIT_LABELS = {
    breaker.CLOSED: "closed",
    breaker.OPEN: "OPEN: calls fail fast",
    breaker.HALF_OPEN: "half-open: probing",
}


@admin.register(Upstream)
class UpstreamAdmin(TenantScopedAdmin):
    form = UpstreamAdminForm
    list_display = ("name", "tenant", "url", "prefix", "mode", "enabled", "status", "circuits", "review")
    list_filter = ("enabled", "transport", "mode")
    search_fields = ("name", "url")
    actions = ("publish_all_remote_tools",)
    readonly_fields = (
        "stored_secrets", "stored_oauth_secret", "status", "last_seen", "remote_tools", "prompts_and_resources",
        "deployment_circuits", "deployment_calls", "health", "health_detail",
    )  # fmt: skip
    fieldsets = (
        (None, {"fields": ("tenant", "name", "url", "transport", "prefix", "mode", "timeout_seconds", "enabled", "publish_new")}),
        ("Prompts and resources", {"fields": ("publish_prompts", "publish_resources")}),
        ("Secret headers", {"fields": ("stored_secrets", "new_secret_headers", "clear_secrets")}),
        ("OAuth client credentials (AMB-198)", {"fields": ("oauth_client_id", "stored_oauth_secret", "new_oauth_client_secret", "oauth_token_url", "oauth_scope")}),
        ("Calls as the caller (AMB-216)", {"fields": ("connection",)}),
        ("What it offered when last asked", {"fields": ("status", "last_seen", "remote_tools", "prompts_and_resources")}),
        ("Health across the deployment, last hour (every serving and worker process's flushes)",
         {"fields": ("deployment_circuits", "deployment_calls")}),
        ("Only the process serving this page, since it started",
         {"fields": ("health", "health_detail"), "classes": ("collapse",)}),
    )  # fmt: skip

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None and self.has_change_permission(request, obj):
            return fieldsets
        if obj is None:
            return fieldsets[:5]  # nothing was seen before it exists
        # A viewer's read-only page cannot show the form's write-only fields.
        return [
            *fieldsets[:2],
            ("Secret headers", {"fields": ("stored_secrets",)}),
            (
                "OAuth client credentials (AMB-198)",
                {"fields": ("oauth_client_id", "stored_oauth_secret", "oauth_token_url", "oauth_scope")},
            ),
            *fieldsets[4:],
        ]

    @admin.display(description="stored client secret")
    def stored_oauth_secret(self, obj: Upstream) -> str:
        return "set." if obj.oauth_client_secret else "none set."

    @admin.display(description="stored secret headers")
    def stored_secrets(self, obj: Upstream) -> str:
        names = secret_names(obj.secret_headers)
        return (
            (str(format_html_join(", ", "{} (set)", ((n,) for n in names))) + ".") if names else "none set."
        )

    @admin.display(description="status")
    def status(self, obj: Upstream) -> str:
        if obj.last_error:
            return f"error: {obj.last_error}"
        if obj.last_synced_at is None:
            return "never synced"
        return f"synced {obj.last_synced_at:%Y-%m-%d %H:%M}"

    @admin.display(description="server")
    def last_seen(self, obj: Upstream) -> str:
        if not obj.last_protocol_version:
            return "—"
        info = obj.last_server_info or {}
        return f"{info.get('name', '?')} {info.get('version', '')} speaking {obj.last_protocol_version}"

    @admin.display(description="circuit (deployment, last hour)")
    def circuits(self, obj: Upstream) -> str:
        """How many serving processes have its circuit open or half-open now, from their flushes."""
        seen = deployment_health.of(obj)
        if not seen.circuits:
            return "no calls in the last hour"
        fresh = seen.fresh
        parts = [
            f"{CIRCUIT_LABELS[state]} in {n} of {len(fresh)} processes"
            for state in (breaker.OPEN, breaker.HALF_OPEN)
            if (n := sum(1 for c in fresh if c.state == state))
        ] or ([f"closed ({len(fresh)} processes)"] if fresh else [])
        stale = len(seen.circuits) - len(fresh)
        return "; ".join(parts + ([f"{stale} stale report{'s' if stale > 1 else ''}"] if stale else []))

    @admin.display(description="circuit per process")
    def deployment_circuits(self, obj: Upstream) -> str:
        """Each serving process's breaker, as it last reported it; a stale report may be a stopped process."""
        seen = deployment_health.of(obj) if obj.pk else None
        if seen is None or not seen.circuits:
            return "No serving process reported calls to it in the last hour."
        stale = f"stale: not confirmed for {deployment_health.stale_after_seconds():.0f} s (two flushes)"
        return format_html_join(
            mark_safe("<br>"),  # noqa: S308 (a constant)
            "{}: {} (reported {} UTC{})",
            (
                (
                    c.process,
                    CIRCUIT_LABELS.get(c.state, c.state),
                    f"{c.reported_at:%H:%M:%S}",
                    f"; {stale}" if c.stale else "",
                )
                for c in seen.circuits
            ),
        )

    @admin.display(description="calls")
    def deployment_calls(self, obj: Upstream) -> str:
        """Last success, median latency and error rate of every process's exchanges in the last hour."""
        seen = deployment_health.of(obj) if obj.pk else None
        if seen is None:
            return "—"
        return _describe(seen.totals, "Summed over every serving and worker process for the last hour.")

    @admin.display(description="circuit in this process")
    def health(self, obj: Upstream) -> str:
        """The breaker's state in this process (calls fail fast while it is open)."""
        found = call_stats.of((obj.tenant_id, obj.pk)) if obj.pk else None
        if found is None:
            return "no calls in this process"
        return CIRCUIT_LABELS[found.circuit]

    @admin.display(description="calls in this process")
    def health_detail(self, obj: Upstream) -> str:
        """Last success, median latency and error rate of this process's exchanges with the upstream."""
        found = call_stats.of((obj.tenant_id, obj.pk)) if obj.pk else None
        if found is None:
            return "This process has not called it since it started."
        return _describe(found, "Counted in this serving process since it started.")

    @admin.display(description="to review")
    def review(self, obj: Upstream) -> str:
        pending = sum(1 for row in obj.remote_tools.all() if row.pending_review)
        pending += sum(len(keys) for keys in obj.extras_pending().values())
        return f"{pending} changed" if pending else "—"

    @admin.display(description="prompts and resources")
    def prompts_and_resources(self, obj: Upstream) -> str:
        if obj.pk is None:
            return "—"
        url = reverse("admin:mcp_app_upstream_extras", args=[obj.pk])
        pending = obj.extras_pending()
        note = " (changed upstream: review)" if pending else ""
        return format_html('<a href="{}">Published prompts, resources and templates{}</a>', url, note)

    @admin.display(description="remote tools")
    def remote_tools(self, obj: Upstream) -> str:
        if obj.pk is None:
            return "—"
        url = reverse("admin:mcp_app_upstream_tools", args=[obj.pk])
        count = obj.remote_tools.count()
        return format_html('<a href="{}">{} remote tools: publish, review, accept</a>', url, count)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("from-registry/", wrap(self.registry_view), name="mcp_app_upstream_from_registry"),
            path("<path:object_id>/test/", wrap(self.test_view), name="mcp_app_upstream_test"),
            path("<path:object_id>/sync/", wrap(require_POST(self.sync_view)), name="mcp_app_upstream_sync"),
            path("<path:object_id>/tools/", wrap(self.tools_view), name="mcp_app_upstream_tools"),
            path(
                "<path:object_id>/tools/publish/",
                wrap(require_POST(self.publish_many_view)),
                name="mcp_app_upstream_publish_many",
            ),
            path("<path:object_id>/extras/", wrap(self.extras_view), name="mcp_app_upstream_extras"),
            path(
                "<path:object_id>/extras/accept/",
                wrap(require_POST(self.extras_accept_view)),
                name="mcp_app_upstream_extras_accept",
            ),
            path(
                "<path:object_id>/tools/<int:row_id>/<str:action>/",
                wrap(require_POST(self.tool_action_view)),
                name="mcp_app_upstream_tool_action",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        extra = {
            **(extra_context or {}),
            "can_change": self.has_change_permission(request, obj),
            # What its "Publish all" button would publish (the button says how many).
            "publishable": upstream_publishing.publishable(obj.remote_tools.all()).count() if obj else 0,
        }
        return super().change_view(request, object_id, form_url, extra)

    def registry_view(self, request: HttpRequest) -> HttpResponse:
        return upstream_registry.search_page(self, request)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # "Use this" on the registry page: the entry, read again from the registry, fills the form (AMB-373).
        return {**super().get_changeform_initial_data(request), **upstream_registry.initial(request)}

    @admin.action(description="Publish every remote tool of the selected upstreams", permissions=["change"])
    def publish_all_remote_tools(self, request: HttpRequest, queryset: Any) -> None:
        # The changelist's queryset is the person's tenants' upstreams; only those they may change publish.
        editable = [u.pk for u in queryset if self.has_change_permission(request, u)]
        if len(editable) < len(queryset):
            raise PermissionDenied
        rows = UpstreamTool.objects.filter(upstream__in=editable)
        outcome = upstream_publishing.publish_many(rows, request.user)
        upstream_publishing.tell(request, outcome, "Nothing to publish: the selected upstreams' tools are all published.")

    # --- pages ----------------------------------------------------------------------------------

    def _upstream(self, request: HttpRequest, object_id: str, *, change: bool) -> Upstream:
        upstream = self.get_object(request, object_id)  # another tenant's: 404 like a missing one
        allowed = self.has_change_permission if change else self.has_view_permission
        if not allowed(request, upstream):
            raise PermissionDenied
        return upstream

    def _context(self, request: HttpRequest, upstream: Upstream, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "original": upstream,
            "can_change": self.has_change_permission(request, upstream),
            **extra,
        }

    def test_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """What the upstream offers now (era, server, capabilities, tools...), before anything is published."""
        upstream = self._upstream(request, object_id, change=True)  # it calls out with the secrets
        offering, error = None, ""
        try:
            offering = service.discover(upstream)
        except federation.UpstreamError as exc:
            error = exc.message
        context = self._context(
            request,
            upstream,
            f"Test connection: {upstream}",
            offering=offering,
            error=error,
            capabilities=json.dumps(offering.capabilities, indent=2, sort_keys=True) if offering else "",
        )
        return TemplateResponse(request, "admin/mcp_app/upstream/test.html", context)

    def sync_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        upstream = self._upstream(request, object_id, change=True)
        try:
            # A sync may publish thousands of tools: in a process of its own (AMB-277).
            report = run_apart(service.sync, upstream)
        except federation.UpstreamError as exc:
            messages.error(request, f"Sync failed: {exc.message}")
        except Unfinished as exc:
            messages.error(request, f"Sync failed: {exc} Try again.")
        else:
            parts = [
                f"{len(getattr(report, k))} {k}" for k in ("new", "published", "changed", "gone", "back")
            ]
            messages.success(request, "Synced: " + ", ".join(parts) + ".")
            for name, why in report.not_published.items():
                messages.warning(request, f"{name} was not published: {why}")
        return self._back(request, upstream)

    def _back(self, request: HttpRequest, upstream: Upstream) -> HttpResponse:
        """Back to the page the owner acted from: the upstream's, its prompts and resources, or its remote tools."""
        page = {"extras": "extras", "upstream": "change"}.get(request.POST.get("back", ""), "tools")
        return HttpResponseRedirect(reverse(f"admin:mcp_app_upstream_{page}", args=[upstream.pk]))

    def publish_many_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Publish the ticked remote tools (`row`), or every one not published yet (`which=all`), as one change."""
        upstream = self._upstream(request, object_id, change=True)
        rows = upstream.remote_tools.all()
        if request.POST.get("which") == "all":
            nothing = "Nothing to publish: every tool the upstream offers is published."
        else:
            ids = [int(i) for i in request.POST.getlist("row") if i.isdigit()]
            rows = rows.filter(pk__in=ids)
            nothing = "Nothing to publish: tick the remote tools to publish first." if not ids else (
                "Nothing to publish: the selected tools are published already."
            )
        outcome = upstream_publishing.publish_many(rows, request.user)
        upstream_publishing.tell(request, outcome, nothing)
        return self._back(request, upstream)

    def tools_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        upstream = self._upstream(request, object_id, change=False)
        rows = list(upstream.remote_tools.select_related("tool"))
        entries = [
            {
                "row": row,
                "diff": service.diff(row) if row.pending_review else [],
                "form": PublishForm(
                    initial={"name": f"{upstream.prefix}{row.remote_name}"[:64]}, prefix=f"r{row.pk}"
                ),
            }
            for row in rows
        ]
        publishable = sum(1 for row in rows if not row.published and row.gone_at is None)
        context = self._context(
            request, upstream, f"Remote tools of {upstream}", entries=entries, publishable=publishable
        )
        return TemplateResponse(request, "admin/mcp_app/upstream/tools.html", context)

    def extras_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """What of its prompts, resources and templates clients see, under which name or URI; a held change."""
        upstream = self._upstream(request, object_id, change=False)
        title = f"Prompts and resources of {upstream}"
        found, changes = extras_review.published(upstream), extras_review.diff(upstream)
        context = self._context(request, upstream, title, found=found, changes=changes)
        return TemplateResponse(request, "admin/mcp_app/upstream/extras.html", context)

    def extras_accept_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        upstream = self._upstream(request, object_id, change=True)
        if extras_review.accept(upstream, request.user):
            messages.success(request, "Clients now get the prompts and resources the upstream offers.")
        else:
            messages.info(request, "Nothing to accept: clients already get what the upstream offers.")
        return HttpResponseRedirect(reverse("admin:mcp_app_upstream_extras", args=[upstream.pk]))

    def tool_action_view(
        self, request: HttpRequest, object_id: str, row_id: int, action: str
    ) -> HttpResponse:
        upstream = self._upstream(request, object_id, change=True)
        row = get_object_or_404(UpstreamTool, pk=row_id, upstream=upstream)
        back = HttpResponseRedirect(reverse("admin:mcp_app_upstream_tools", args=[upstream.pk]))
        try:
            if action == "publish":
                form = PublishForm(request.POST, prefix=f"r{row.pk}")
                if not form.is_valid():
                    problems = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
                    messages.error(request, f"{row.remote_name} was not published: {problems}")
                    return back
                data = form.cleaned_data
                tool = service.publish(
                    row, name=data["name"], fixed=data["fixed"], approval=data["approval"], user=request.user
                )
                messages.success(request, f"{row.remote_name} is published as {tool.name}.")
            elif action == "unpublish":
                service.unpublish(row, request.user)
                messages.success(request, f"{row.remote_name} is unpublished.")
            elif action == "accept":
                tool = service.accept(row, request.user)
                messages.success(request, f"{tool.name} now serves the upstream's new definition.")
            else:
                raise Http404("No such action.")
        except service.UpstreamProblem as exc:
            messages.error(request, f"{row.remote_name}: {exc}")
        return back


def _describe(found: call_stats.Health, where: str) -> str:
    success = (
        f"last success {datetime.fromtimestamp(found.last_success, UTC):%Y-%m-%d %H:%M:%S} UTC"
        if found.last_success is not None
        else "no success yet"
    )
    if not found.calls:
        return f"No calls; {success}. {where}"
    p50 = found.percentile(0.5)
    latency = f"latency p50 {p50:.0f} ms" if p50 is not None else "no latency yet"
    failed = ", ".join(f"{n} {kind}" for kind, n in found.failures.items() if n)
    rate = f"error rate {found.error_rate:.0%} of {found.calls} ({failed or 'none failed'})"
    return f"{success}; {latency}; {rate}. {where}"
