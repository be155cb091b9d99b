"""Rows the system writes, shown read-only to the tenant's members: runs, approvals and sessions."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from mcp_app.background import runs
from mcp_app.models import ApprovalDecision, McpSession, ToolRun
from mcp_app.protocol import tasks
from tenants.admin import TenantScopedAdmin, editable_tenant_ids

logger = logging.getLogger(__name__)


class ReadOnlyTenantAdmin(TenantScopedAdmin):
    """Rows the system writes (sessions, runs): members of the tenant read them, nobody edits them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(McpSession)
class McpSessionAdmin(ReadOnlyTenantAdmin):
    """Read-only view of open sessions, for troubleshooting."""

    list_display = ("id", "tenant", "user", "created_at", "last_seen_at")
    readonly_fields = ("id", "tenant", "user", "state", "created_at", "last_seen_at")
    ordering = ("-last_seen_at",)


@admin.register(ToolRun)
class ToolRunAdmin(ReadOnlyTenantAdmin):
    """Background runs and tasks: what is queued or running now (live progress, a cancel button for
    editors), how runs ended, what they were called with, returned and asked."""

    change_form_template = "admin/mcp_app/toolrun/change_form.html"
    list_display = (
        "tool_name",
        "tenant",
        "status",
        "task_display",
        "queued_at",
        "wait_display",
        "duration_display",
        "user",
    )
    list_filter = ("status",)
    search_fields = ("tool_name", "job_id", "task_id", "detail")
    readonly_fields = (
        "job_id",
        "task_id",
        "tenant",
        "tool",
        "tool_name",
        "status",
        "user",
        "client_id",
        "session_id",
        "queued_at",
        "started_at",
        "finished_at",
        "duration_display",
        "worker",
        "detail",
        "arguments_display",
        "result_display",
        "exchanges_display",
    )
    fieldsets = (
        (None, {"fields": ("tenant", "tool", "tool_name", "status", "detail", "task_id")}),
        ("Call", {"fields": ("arguments_display", "result_display", "exchanges_display")}),
        (
            "When and where",
            {"fields": ("queued_at", "started_at", "finished_at", "duration_display", "worker")},
        ),
        ("Caller", {"fields": ("user", "client_id", "session_id", "job_id")}),
    )
    ordering = ("-queued_at",)

    @admin.display(description="task")
    def task_display(self, obj: ToolRun) -> str:
        return "task" if obj.task_id else ""

    @admin.display(description="waited")
    def wait_display(self, obj: ToolRun) -> str:
        return f"{(obj.started_at - obj.queued_at).total_seconds():.2f} s" if obj.started_at else "-"

    @admin.display(description="ran")
    def duration_display(self, obj: ToolRun) -> str:
        return _ran(obj)

    @admin.display(description="arguments")
    def arguments_display(self, obj: ToolRun) -> str:
        return _json_block(obj.arguments)

    @admin.display(description="result")
    def result_display(self, obj: ToolRun) -> str:
        result = obj.result if obj.result is not None else (obj.task_outcome or {}).get("result")
        return _json_block(result) if result is not None else "-"

    @admin.display(description="questions asked")
    def exchanges_display(self, obj: ToolRun) -> str:
        if not obj.exchanges:
            return "-"
        return format_html_join(
            "",
            "<p>{} <strong>{}</strong></p>{}<p>{}</p>{}",
            (
                (
                    entry.get("at", ""),
                    (entry.get("asked") or {}).get("method", "?"),
                    _json_block((entry.get("asked") or {}).get("params")),
                    _said(entry),
                    _json_block(entry["answer"]) if "answer" in entry else "",
                )
                for entry in obj.exchanges
            ),
        )

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<path:object_id>/live/",
                self.admin_site.admin_view(self.live_view),
                name="mcp_app_toolrun_live",
            ),
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(self.cancel_view),
                name="mcp_app_toolrun_cancel",
            ),
            *super().get_urls(),
        ]

    def _can_cancel(self, request: HttpRequest, run: ToolRun) -> bool:
        ids = editable_tenant_ids(request)
        return (ids is None or run.tenant_id in ids) and run.status in ACTIVE

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        extra = {**(extra_context or {})}
        if run is not None:
            extra.update(live=_live(run), can_cancel=self._can_cancel(request, run))
        return super().change_view(request, object_id, form_url, extra)

    def live_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        """What the run's page polls while it is queued or running: status, progress, duration."""
        run = self.get_object(request, object_id)
        if run is None:
            raise Http404
        return JsonResponse(_live(run))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """An editor stops a queued or running run; its caller gets an error result saying so."""
        run = self.get_object(request, object_id)
        if run is None:
            raise Http404
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self._can_cancel(request, run):
            raise PermissionDenied
        who = request.user.get_username()
        try:
            tasks.cancel_by_operator(run, who)
        except Exception:
            logger.exception("could not cancel run %s", run.job_id)
            messages.error(request, "The run could not be cancelled: Redis did not answer. Try again.")
        else:
            messages.success(request, "Cancellation sent: the run stops within a second or two.")
        return HttpResponseRedirect(reverse("admin:mcp_app_toolrun_change", args=[run.pk]))


def _ran(run: ToolRun) -> str:
    if run.started_at and run.finished_at:
        return f"{(run.finished_at - run.started_at).total_seconds():.2f} s"
    if run.started_at:
        return f"{(timezone.now() - run.started_at).total_seconds():.0f} s so far"
    return "-"


def _said(entry: dict[str, Any]) -> str:
    if "error" in entry:
        return f"Error: {entry['error']}"
    return "Answer:" if "answer" in entry else "Waiting for the answer (the task is input_required)."


def _json_block(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


ACTIVE = (ToolRun.Status.QUEUED, ToolRun.Status.RUNNING)


def _live(run: ToolRun) -> dict[str, Any]:
    active = run.status in ACTIVE
    progress = runs.progress_of(run.job_id) if active else None
    return {
        "status": run.status,
        "label": run.get_status_display(),
        "active": active,
        "progress": progress,
        "ran": _ran(run),
        "detail": run.detail,
    }


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnlyTenantAdmin):
    """Every answer to a tool's approval question: who, when, for which arguments, and what was decided."""

    list_display = ("tool_name", "tenant", "outcome", "decided_at", "user", "client_id", "session_id")
    list_filter = ("outcome",)
    search_fields = ("tool_name", "client_id", "session_id")
    readonly_fields = (
        "tenant",
        "tool",
        "tool_name",
        "arguments",
        "outcome",
        "user",
        "client_id",
        "session_id",
        "client_address",
        "remembered_for",
        "decided_at",
    )
    ordering = ("-decided_at",)
