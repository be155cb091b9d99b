"""The admin of a tenant's guardrails (AMB-354): owners write them, checked when saved (an RE2 pattern
that compiles and cannot match nothing, a tool that exists, at most MAX_GUARDRAILS_PER_TENANT)."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.providers import OwnersOnly
from mcp_app.models import Guardrail


@admin.register(Guardrail)
class GuardrailAdmin(OwnersOnly):
    list_display = ("name", "tenant", "detector", "where", "action", "tool_or_all", "enabled")
    list_filter = ("detector", "where", "action", "enabled")
    search_fields = ("name", "description", "pattern", "tool")
    fields = ("tenant", "name", "description", "detector", "pattern", "where", "action", "tool", "enabled")

    @admin.display(description="Guards", ordering="tool")
    def tool_or_all(self, obj: Guardrail) -> str:
        return obj.tool or "everything"
