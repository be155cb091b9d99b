"""A tenant's governance events in the admin (AMB-355): read-only, each tenant's to its owners, and
exported as JSON lines (what the list shows, with its filters and search) for a SIEM to take."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path
from django.utils import timezone

from mcp_app.admin.providers import OwnersOnly
from mcp_app.models import GovernanceEvent


def json_lines(events: QuerySet) -> Iterator[str]:
    for event in events.select_related("tenant").order_by("created_at", "id").iterator():
        yield json.dumps(
            {
                "id": event.pk, "time": event.created_at.isoformat(), "tenant": event.tenant.slug,
                "kind": event.kind, "rule": event.rule, "target": event.target, "method": event.method,
                "caller": event.caller, "detail": event.detail,
            },
            ensure_ascii=False, sort_keys=True,
        ) + "\n"  # fmt: skip


def jsonl_response(events: QuerySet) -> StreamingHttpResponse:
    response = StreamingHttpResponse(json_lines(events), content_type="application/jsonl")
    response["Content-Disposition"] = (
        f'attachment; filename="governance-{timezone.now():%Y%m%d-%H%M%S}.jsonl"'
    )
    return response


@admin.register(GovernanceEvent)
class GovernanceEventAdmin(OwnersOnly):
    list_display = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")
    list_filter = ("kind", "method")
    search_fields = ("rule", "target", "caller")
    date_hierarchy = "created_at"
    list_select_related = ("tenant",)
    readonly_fields = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")
    actions = ("export_selected",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        export = path(
            "export/", self.admin_site.admin_view(self.export_view), name="mcp_app_governanceevent_export"
        )
        return [export, *super().get_urls()]

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The list's rows (same filters, search and date drill-down) as JSON lines."""
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
