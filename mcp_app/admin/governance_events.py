"""A tenant's governance events in the admin (AMB-355): read-only, each tenant's to its owners, and
exported as JSON lines (what the list shows, with its filters and search) for a SIEM to take.

A table of millions of rows (AMB-361): the list asks nothing of the whole table. It counts at most
COUNT_CAP rows (a count of a million is 140 ms on PostgreSQL), its filters offer fixed choices (a
filter offering the methods found would read every row for them) and time is filtered by ranges
(today, the past 7 days, this month, this year), not by a drill-down that reads every row's year."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.functional import cached_property

from mcp_app.admin.providers import OWNERS, OwnersOnly
from mcp_app.models import GovernanceEvent
from tenants.admin import editable_tenant_ids
from tenants.models import Tenant


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


COUNT_CAP = 10_000
TENANT_CHOICES = 200
# The methods the one decision and the guardrails record events of (governance/decision.py, guardrails.py).
METHODS = ("tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete",
           "elicitation/create")  # fmt: skip


class CappedPaginator(Paginator):
    """Counts no further than COUNT_CAP + 1 rows: past it the list has COUNT_CAP // per page pages,
    and the heading says "10,001" for "more than 10,000" (narrow it with a filter or a search)."""

    @cached_property
    def count(self) -> int:
        rows = self.object_list[: COUNT_CAP + 1]
        return rows.count() if isinstance(rows, QuerySet) else len(rows)


class MethodFilter(admin.SimpleListFilter):
    title = "method"
    parameter_name = "method"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(method, method) for method in METHODS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(method=self.value()) if self.value() else queryset


class TenantFilter(admin.SimpleListFilter):
    """The tenants the person owns (the first TENANT_CHOICES by slug for a superuser), read from the
    tenants' table: Django's filter of the tenants present would read every event for them."""

    title = "tenant"
    parameter_name = "tenant__id__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ids = editable_tenant_ids(request, OWNERS)
        tenants = Tenant.objects.all() if ids is None else Tenant.objects.filter(id__in=ids)
        return [(str(t.pk), t.slug) for t in tenants.order_by("slug")[:TENANT_CHOICES]]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit():
            raise IncorrectLookupParameters("A tenant filter is a tenant's id.")
        return queryset.filter(tenant_id=int(value))


@admin.register(GovernanceEvent)
class GovernanceEventAdmin(OwnersOnly):
    list_display = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")
    list_filter = ("kind", MethodFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("rule", "target", "caller")
    list_select_related = ("tenant",)
    paginator = CappedPaginator
    show_full_result_count = False
    readonly_fields = ("created_at", "tenant", "kind", "rule", "target", "method", "caller", "detail")
    actions = ("export_selected",)

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        return [TenantFilter, *self.list_filter]

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
        """The list's rows (same filters and search) as JSON lines."""
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
