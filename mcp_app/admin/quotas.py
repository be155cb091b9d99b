"""The admin of a tenant's quotas (AMB-352): owners write them as drafts and publish them, with
versions and history (AMB-362), checked when saved (a tool that exists, a bounded count); calls past
one answer `isError: true` naming it."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.providers import OwnersOnly
from mcp_app.admin.publishing import DraftFilter, PublishingAdminMixin
from mcp_app.models import Quota


@admin.register(Quota)
class QuotaAdmin(PublishingAdminMixin, OwnersOnly):
    list_display = ("name", "tenant", "tool_or_all", "calls", "window", "per", "enabled", "publishing")
    list_filter = ("window", "per", "enabled", DraftFilter)
    search_fields = ("name", "description", "tool")
    fields = ("tenant", "name", "description", "tool", "calls", "window", "per", "enabled")

    @admin.display(description="Tool", ordering="tool")
    def tool_or_all(self, obj: Quota) -> str:
        return obj.tool or "every tool"
