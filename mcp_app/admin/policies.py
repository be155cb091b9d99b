"""The admin of a tenant's policies (AMB-347): owners write who may use what; the condition is checked
when saved (governance/conditions.py) and its error shown on the field."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.providers import OwnersOnly
from mcp_app.models import Policy


@admin.register(Policy)
class PolicyAdmin(OwnersOnly):
    list_display = ("name", "tenant", "effect", "applies_to", "condition", "enabled")
    list_filter = ("effect", "applies_to", "enabled")
    search_fields = ("name", "description", "condition")
    fields = ("tenant", "name", "description", "effect", "applies_to", "condition", "enabled")
