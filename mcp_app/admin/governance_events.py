"""A tenant's governance events in the admin (AMB-355): read-only, each tenant's to its owners."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from mcp_app.admin.providers import OwnersOnly
from mcp_app.models import GovernanceEvent


@admin.register(GovernanceEvent)
class GovernanceEventAdmin(OwnersOnly):
    list_display = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")
    list_filter = ("kind", "method")
    search_fields = ("rule", "target", "caller")
    date_hierarchy = "created_at"
    list_select_related = ("tenant",)
    readonly_fields = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
