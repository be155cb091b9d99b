"""Rows the system writes, shown read-only to the tenant's members: runs, approvals and sessions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from mcp_app.models import ApprovalDecision, McpSession, ToolRun
from tenants.admin import TenantScopedAdmin


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
    """Read-only history of background tool runs: what is queued or running now, and how runs ended."""

    list_display = ("tool_name", "tenant", "status", "queued_at", "wait_display", "duration_display", "user")
    list_filter = ("status",)
    search_fields = ("tool_name", "job_id", "detail")
    readonly_fields = (
        "job_id",
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
        "worker",
        "detail",
    )
    ordering = ("-queued_at",)

    @admin.display(description="waited")
    def wait_display(self, obj: ToolRun) -> str:
        return f"{(obj.started_at - obj.queued_at).total_seconds():.2f} s" if obj.started_at else "-"

    @admin.display(description="ran")
    def duration_display(self, obj: ToolRun) -> str:
        if obj.started_at and obj.finished_at:
            return f"{(obj.finished_at - obj.started_at).total_seconds():.2f} s"
        return "-"


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
