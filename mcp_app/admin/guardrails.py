"""The admin of a tenant's guardrails (AMB-354): owners write them as drafts and publish them, with
versions and history (AMB-362), checked when saved (an RE2 pattern that compiles and cannot match
nothing, a tool that exists, at most MAX_GUARDRAILS_PER_TENANT)."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.providers import OwnersOnly
from mcp_app.admin.publishing import DraftFilter, PublishingAdminMixin
from mcp_app.models import Guardrail


@admin.register(Guardrail)
class GuardrailAdmin(PublishingAdminMixin, OwnersOnly):
    list_display = ("name", "tenant", "detector", "where", "action", "tool_or_all", "enabled", "publishing")
    list_filter = ("detector", "where", "action", "enabled", DraftFilter)
    search_fields = ("name", "description", "pattern", "tool")
    fields = ("tenant", "name", "description", "detector", "pattern", "where", "action", "tool", "enabled")

    @admin.display(description="Guards", ordering="tool")
    def tool_or_all(self, obj: Guardrail) -> str:
        return obj.tool or "everything"
