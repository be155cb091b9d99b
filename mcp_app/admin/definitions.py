"""Admin for tenant-defined tools, prompts, resources and templates, scoped by membership.

Saving any of them announces the change to connected clients (mcp_app.signals).
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from mcp_app.admin import try_tool
from mcp_app.admin.forms import (
    ResourceAdminForm,
    ResourceTemplateAdminForm,
    ToolAdminForm,
    secret_summary,
)
from mcp_app.admin.history import HistoryAdminMixin
from mcp_app.core.types import offered_to_legacy
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from mcp_app.oauth.resources import canonical_uri
from mcpsite.forms import json_formfield
from tenants.admin import TenantScopedAdmin


class DefinitionAdmin(HistoryAdminMixin, TenantScopedAdmin):
    """Shared by every definition: JSON textareas, the tenant filter, enabled toggles, history."""

    list_filter = ("enabled",)
    readonly_fields = ("updated_at",)
    save_on_top = True
    # Fields declared on the form only (no model attribute): a read-only view cannot show them.
    form_only_fields: tuple[str, ...] = ()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> list[tuple[Any, dict[str, Any]]]:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        trimmed = []
        for name, options in fieldsets:
            fields = [f for f in options["fields"] if f not in self.form_only_fields]
            if fields:
                trimmed.append((name, {**options, "fields": fields}))
        return trimmed

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField):
            return json_formfield(db_field, **kwargs)
        return super().formfield_for_dbfield(db_field, request, **kwargs)


@admin.register(Tool)
class ToolAdmin(DefinitionAdmin):
    form = ToolAdminForm
    form_only_fields = ("python_callable", "secret_headers", "clear_secrets")
    readonly_fields = ("stored_secrets", "revisions", "updated_at")
    list_display = ("name", "tenant", "title", "handler", "execution", "offered_to", "enabled", "updated_at")
    search_fields = ("name", "title", "description")
    fieldsets = (
        (None, {"fields": ("tenant", "name", "title", "description", "enabled")}),
        ("Schemas", {"fields": ("input_schema", "output_schema", "revisions")}),
        (
            "Handler",
            {
                "fields": (
                    "handler",
                    "python_callable",
                    "handler_config",
                    "timeout_seconds",
                    "execution",
                    "task_support",
                )
            },
        ),
        ("Authorization", {"fields": ("required_scope",)}),
        ("Approval", {"fields": ("approval", "approval_without_elicitation")}),
        ("Secret headers", {"fields": ("stored_secrets", "secret_headers", "clear_secrets")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )

    @admin.display(description="stored secret headers")
    def stored_secrets(self, obj: Tool) -> str:
        return secret_summary(obj)

    @admin.display(description="offered to")
    def offered_to(self, obj: Tool) -> str:
        return "every revision" if offered_to_legacy(obj.output_schema or None) else "2026-07-28 only"

    @admin.display(description="offered to")
    def revisions(self, obj: Tool) -> str:
        if offered_to_legacy(obj.output_schema or None):
            return "every revision"
        return (
            "2026-07-28 clients only: before 2026-07-28 an output schema must have \"type\": \"object\" "
            "at its root, so legacy clients do not see this tool"
        )

    def get_urls(self) -> list[Any]:
        try_url = path(
            "<path:object_id>/try/", self.admin_site.admin_view(self.try_view), name="mcp_app_tool_try"
        )
        return [try_url, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        extra = {**(extra_context or {}), "can_try": self.has_change_permission(request, obj)}
        return super().change_view(request, object_id, form_url, extra)

    def try_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Run the tool once with arguments typed in the admin (editors and owners: it really runs)."""
        tool = self.get_object(request, object_id)
        if not self.has_change_permission(request, tool):
            raise PermissionDenied
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Try {tool.name}",
            "tool": tool,
            "version": try_tool.LATEST,
            "mcp_url": canonical_uri(tool.tenant.slug),
            "arguments": json.dumps(try_tool.example_arguments(tool.input_schema), indent=2),
        }
        if request.method == "POST":
            context["arguments"] = request.POST.get("arguments", "")
            try:
                arguments = try_tool.parse_arguments(context["arguments"])
                context["outcome"] = async_to_sync(try_tool.run)(
                    tool.tenant.slug, tool.name, request.user.pk, arguments
                )
            except try_tool.TryError as exc:
                context["problem"] = str(exc)
        return TemplateResponse(request, "admin/mcp_app/tool/try_tool.html", context)


@admin.register(Prompt)
class PromptAdmin(DefinitionAdmin):
    list_display = ("name", "tenant", "title", "enabled", "updated_at")
    search_fields = ("name", "title", "description")
    fieldsets = (
        (None, {"fields": ("tenant", "name", "title", "description", "enabled")}),
        ("Template", {"fields": ("arguments", "messages")}),
        ("Presentation", {"fields": ("icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )


@admin.register(Resource)
class ResourceAdmin(DefinitionAdmin):
    form = ResourceAdminForm
    form_only_fields = ("upload", "clear_blob")
    list_display = ("uri", "tenant", "name", "mime_type", "size_display", "enabled", "updated_at")
    search_fields = ("uri", "name", "title", "description")
    readonly_fields = ("contents_summary", "updated_at")
    fieldsets = (
        (None, {"fields": ("tenant", "uri", "name", "title", "description", "mime_type", "enabled")}),
        ("Contents", {"fields": ("text", "upload", "clear_blob", "contents_summary")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )

    @admin.display(description="size")
    def size_display(self, obj: Resource) -> str:
        return f"{obj.size} B"

    @admin.display(description="current contents")
    def contents_summary(self, obj: Resource) -> str:
        if obj.pk is None:
            return "—"
        if obj.blob is not None:
            return f"uploaded file, {len(obj.blob)} bytes ({obj.mime_type or 'no MIME type'})"
        return f"text, {len(obj.text.encode())} bytes"


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(DefinitionAdmin):
    form = ResourceTemplateAdminForm
    list_display = ("uri_template", "tenant", "name", "mime_type", "handler", "enabled", "updated_at")
    search_fields = ("uri_template", "name", "title", "description")
    fieldsets = (
        (
            None,
            {"fields": ("tenant", "uri_template", "name", "title", "description", "mime_type", "enabled")},
        ),
        ("Handler", {"fields": ("handler", "handler_config", "completions")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )
