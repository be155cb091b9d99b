"""Admin for tenant-defined tools, prompts, resources and templates, scoped by membership.

Saving any of them announces the change to connected clients (mcp_app/signals/definitions.py).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.timezone import localtime

from lib.formfields import json_formfield
from mcp_app.admin import json_check, try_search
from mcp_app.admin.app_preview import AppPreview
from mcp_app.admin.forms import (
    PromptAdminForm,
    ResourceAdminForm,
    ResourceTemplateAdminForm,
    ToolAdminForm,
    secret_summary,
)
from mcp_app.admin.previews import template_preview
from mcp_app.admin.publishing import DraftFilter, PublishingAdminMixin
from mcp_app.admin.self_check import SelfCheckOnSave
from mcp_app.admin.try_page import TryPages
from mcp_app.core.types import offered_to_legacy
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tenants.admin import TenantScopedAdmin

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec


class DefinitionAdmin(SelfCheckOnSave, PublishingAdminMixin, TenantScopedAdmin):
    """Shared by every definition: JSON textareas, the tenant filter, enabled toggles, drafts, history,
    the self-check's warnings after a save (of the draft)."""

    list_filter: ClassVar[tuple[Any, ...]] = ("enabled", DraftFilter)
    readonly_fields: ClassVar[tuple[str, ...]] = ("updated_at",)
    save_on_top = True
    # Fields declared on the form only (no model attribute): a read-only view cannot show them.
    form_only_fields: tuple[str, ...] = ()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        trimmed: list[tuple[Any, _FieldOpts]] = []
        for name, options in fieldsets:
            fields = [f for f in options["fields"] if f not in self.form_only_fields]
            if fields:
                trimmed.append((name, {**options, "fields": fields}))
        return trimmed

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField):
            # The structured editor asks this admin's check-json/ as you type (AMB-70).
            check_url = reverse(f"admin:{self._url_prefix()}_check_json")
            return json_formfield(db_field, check_url=check_url, **kwargs)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def _url_prefix(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}"

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(json_check.check_view(self.opts.model_name or ""))
        check = path("check-json/", view, name=f"{self._url_prefix()}_check_json")
        return [check, *super().get_urls()]

    @admin.display(description="description")
    def short_description(self, obj: Any) -> str:
        """The first line of the description, cut to fit one row of the list."""
        first = (obj.description or "").strip().splitlines()
        return truncatechars(first[0], 60) if first else ""

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: Any) -> str:
        """Day and minute, in the site's time zone: one short line instead of "Nov. 25, 2026, 9:22 a.m."."""
        return localtime(obj.updated_at).strftime("%Y-%m-%d %H:%M") if obj.updated_at else "—"


# An uploaded image larger than this is not inlined into the page as a preview.
PREVIEW_BYTES = 2 * 1024 * 1024


@admin.register(Tool)
class ToolAdmin(TryPages, DefinitionAdmin):
    form = ToolAdminForm
    form_only_fields = ("python_callable", "secret_headers", "clear_secrets")
    readonly_fields = ("stored_secrets", "revisions", "updated_at")
    # The columns a person scans, each one short line (AMB-73).
    list_display = ("name", "tenant", "short_description", "kind", "runs", "enabled", "publishing", "updated")
    list_filter = ("enabled", DraftFilter, "handler", "execution")
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
                    "worker_wait_seconds",
                    "task_support",
                )
            },
        ),
        ("Authorization", {"fields": ("required_scope",)}),
        ("Approval", {"fields": ("approval", "approval_without_elicitation")}),
        ("Kept results", {"fields": ("result_cache_seconds", "result_cache_shared")}),
        ("Secret headers", {"fields": ("stored_secrets", "secret_headers", "clear_secrets")}),
        (
            "Presentation",
            {
                "fields": ("annotations", "icons", "meta"),
                "classes": ("collapse",),
                # MCP Apps (AMB-272): where an owner links a tool to its app.
                "description": 'To show the result in an MCP App, set _meta to {"ui": {"resourceUri": '
                '"ui://…"}} naming a ui:// resource of this tenant (text/html;profile=mcp-app); add '
                '"visibility": ["app"] for a tool only its app calls (clients without apps never see it).',
            },
        ),
        ("State", {"fields": ("updated_at",)}),
    )

    @admin.display(description="stored secret headers")
    def stored_secrets(self, obj: Tool) -> str:
        return secret_summary(obj)

    @admin.display(description="offered to")
    def revisions(self, obj: Tool) -> str:
        if offered_to_legacy(obj.output_schema or None):
            return "every revision"
        return (
            '2026-07-28 clients only: before 2026-07-28 an output schema must have "type": "object" '
            "at its root, so legacy clients do not see this tool"
        )

    @admin.display(description="kind", ordering="handler")
    def kind(self, obj: Tool) -> str:
        return obj.handler

    @admin.display(description="runs", ordering="execution")
    def runs(self, obj: Tool) -> str:
        """Inline or background, and "2026-07-28 only" when older clients cannot see the tool."""
        where = "background" if obj.execution == "background" else "inline"
        return where if offered_to_legacy(obj.output_schema or None) else f"{where}, 2026-07-28 only"

    def get_urls(self) -> list[Any]:
        search = path("search/", self.admin_site.admin_view(self.search_view), name="mcp_app_tool_search")
        return [search, *self.try_urls(), *super().get_urls()]

    def search_view(self, request: HttpRequest) -> HttpResponse:
        """Search mode tried: what search_tools gives a client (AMB-376)."""
        return try_search.search_page(self, request)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        extra = {**(extra_context or {}), "can_try": self.has_change_permission(request, obj)}
        return super().change_view(request, object_id, form_url, extra)


@admin.register(Prompt)
class PromptAdmin(DefinitionAdmin):
    form = PromptAdminForm
    list_display = ("name", "tenant", "title", "enabled", "publishing", "updated")
    search_fields = ("name", "title", "description")
    fieldsets = (
        (None, {"fields": ("tenant", "name", "title", "description", "enabled")}),
        ("Template", {"fields": ("arguments", "messages")}),
        ("Presentation", {"fields": ("icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )


@admin.register(Resource)
class ResourceAdmin(AppPreview, DefinitionAdmin):
    form = ResourceAdminForm
    form_only_fields = ("upload", "clear_blob")
    list_display = ("uri", "tenant", "name", "mime_type", "size_display", "enabled", "publishing", "updated")
    search_fields = ("uri", "name", "title", "description")
    readonly_fields = ("contents_summary", "preview", "app_preview", "updated_at")
    fieldsets = (
        (None, {"fields": ("tenant", "uri", "name", "title", "description", "mime_type", "enabled")}),
        (
            "Contents",
            {"fields": ("text", "upload", "clear_blob", "contents_summary", "preview", "app_preview")},
        ),
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

    @admin.display(description="preview")
    def preview(self, obj: Resource) -> str:
        """What a client shows of the saved contents: the text, or the image rendered (AMB-261)."""
        if obj.pk is None:
            return "Saved contents are shown here."
        if obj.blob is not None:
            if (obj.mime_type or "").startswith("image/") and len(obj.blob) <= PREVIEW_BYTES:
                data = base64.b64encode(obj.blob).decode("ascii")
                return format_html(
                    '<div class="resource-preview"><img src="data:{};base64,{}" alt="{}"></div>',
                    obj.mime_type, data, obj.name or obj.uri,
                )  # fmt: skip
            return "A binary file: clients receive it as a blob."
        return format_html(
            '<div class="resource-preview"><pre>{}</pre></div>', truncatechars(obj.text, 20000)
        )

    def get_urls(self) -> list[Any]:
        return [*self.app_preview_urls(), *super().get_urls()]


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(DefinitionAdmin):
    form = ResourceTemplateAdminForm
    list_display = (
        "uri_template",
        "tenant",
        "name",
        "mime_type",
        "handler",
        "enabled",
        "publishing",
        "updated",
    )
    search_fields = ("uri_template", "name", "title", "description")
    fieldsets = (
        (
            None,
            {"fields": ("tenant", "uri_template", "name", "title", "description", "mime_type", "enabled")},
        ),
        ("Handler", {"fields": ("handler", "handler_config", "completions", "preview")}),
        ("Presentation", {"fields": ("annotations", "icons", "meta"), "classes": ("collapse",)}),
        ("State", {"fields": ("updated_at",)}),
    )
    readonly_fields = ("preview", "updated_at")

    @admin.display(description="preview")
    def preview(self, obj: ResourceTemplate) -> str:
        """One URI of the template read as a client reads it (AMB-261)."""
        return template_preview(obj)
