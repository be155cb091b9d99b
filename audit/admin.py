"""The audit trail in the admin: read-only for everyone, each tenant's events to its owners.

A superuser sees every event, those without a tenant (sign-ins, clients) included; an owner sees the
events of the tenants they own; editors and viewers see none. "Export as JSON lines" downloads what
the list shows (its filters and search), and the action exports the selected rows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path
from django.utils import timezone

from audit.export import json_lines
from audit.models import AuditEvent
from tenants import access
from tenants.models import Role

OWNERS = frozenset({Role.OWNER})


def owned_tenant_ids(request: HttpRequest) -> set[int] | None:
    """Tenants whose events the user may read (None: every event, for an active superuser)."""
    memo = vars(request)  # computed once per request, kept on it
    if "_audit_tenants" not in memo:
        memo["_audit_tenants"] = access.tenant_ids_for(request.user, edit=True, roles=OWNERS)
    tenant_ids: set[int] | None = memo["_audit_tenants"]
    return tenant_ids


def jsonl_response(queryset: QuerySet) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        json_lines(queryset.order_by("created_at", "id").iterator()), content_type="application/jsonl"
    )
    name = f"audit-{timezone.now():%Y%m%d-%H%M%S}.jsonl"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    change_list_template = "admin/audit/auditevent/change_list.html"
    list_display = ("created_at", "action", "actor_username", "tenant_slug", "client_id", "source_address")
    list_filter = ("action", "created_at")
    search_fields = ("actor_username", "tenant_slug", "client_id", "source_address")
    date_hierarchy = "created_at"
    actions = ("export_selected",)
    list_select_related = False
    readonly_fields = (
        "created_at", "action", "actor", "actor_username", "tenant", "tenant_slug", "client_id",
        "source_address", "detail",
    )  # fmt: skip

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        ids = owned_tenant_ids(request)
        queryset = super().get_queryset(request)
        return queryset if ids is None else queryset.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = owned_tenant_ids(request)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = owned_tenant_ids(request)
        if ids is None:
            return True
        return bool(ids) if obj is None else obj.tenant_id in ids

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        export = path("export/", self.admin_site.admin_view(self.export_view), name="audit_auditevent_export")
        return [export, *super().get_urls()]

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The changelist's rows (same filters, search and date drill-down) as JSON lines."""
        if not self.has_view_permission(request):
            return HttpResponse("Not allowed.", status=403)
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("Unknown filter in the address.")
        return jsonl_response(changelist.get_queryset(request))

    @admin.action(description="Export selected events as JSON lines")
    def export_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponseBase:
        return jsonl_response(queryset)
