"""History pages of the definition admins: versions with their diffs, revert, deleted ones and restore.

A mixin of DefinitionAdmin (admin/definitions.py). It replaces the stock "History" page (Django's
LogEntry list) with the versions django-simple-history recorded, read through mcp_app/history/service.py.
Scoped exactly like the change form: `get_object` answers 404 for another tenant's row, any member
reads, editors and owners revert and restore (POST with CSRF); a viewer's POST is 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from mcp_app.drafts import service as drafts
from mcp_app.history import service
from tenants.admin import TenantScopedAdmin, editable_tenant_ids, viewable_tenant_ids

# A mixin of a TenantScopedAdmin: the type checker sees it as one (its model, admin_site, get_object, ...).
if TYPE_CHECKING:
    _Base = TenantScopedAdmin
else:
    _Base = object


class HistoryAdminMixin(_Base):
    """Adds <id>/history/ (replaced), <id>/history/<hid>/revert/, deleted/ and deleted/<hid>/restore/."""

    def _name(self, suffix: str) -> str:
        opts = self.model._meta
        return f"{opts.app_label}_{opts.model_name}_{suffix}"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/history/<int:history_id>/revert/",
                wrap(require_POST(self.revert_view)),
                name=self._name("revert"),
            ),
            path(
                "<path:object_id>/history/compare/",
                wrap(self.compare_view),
                name=self._name("compare"),
            ),
            path("deleted/", wrap(self.deleted_view), name=self._name("deleted")),
            path(
                "deleted/<int:history_id>/restore/",
                wrap(require_POST(self.restore_view)),
                name=self._name("restore"),
            ),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "opts": self.model._meta, "title": title, **extra}

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)  # another tenant's: 404 like a missing one
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        context = self._context(
            request,
            f"History of {obj}",
            original=obj,
            object=obj,
            versions=service.versions(self.model, obj.pk),
            can_revert=self.has_change_permission(request, obj),
            **(extra_context or {}),
        )
        return TemplateResponse(request, "admin/mcp_app/history.html", context)

    def revert_view(self, request: HttpRequest, object_id: str, history_id: int) -> HttpResponse:
        obj = self.get_object(request, object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        back = reverse(f"admin:{self._name('history')}", args=[obj.pk])
        try:
            row = drafts.rollback(obj, history_id, request.user)
        except service.NoSuchVersion:
            raise Http404("No such version.") from None
        except service.HistoryError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(back)
        # A message begins with a capital (the admin shows it as written, AMB-293): the kind, then the name.
        kind = capfirst(self.model._meta.verbose_name)
        messages.success(
            request,
            f"{kind} {row} is rolled back: that version is published again as version {row.version}, "
            "the newest entry below. Connected clients are told.",
        )
        return HttpResponseRedirect(back)

    def compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Any two versions of one definition, side by side as a diff (?from=<history id>&to=<history id>)."""
        obj = self.get_object(request, object_id)  # another tenant's: 404 like a missing one
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        try:
            older, newer = int(request.GET.get("from", "")), int(request.GET.get("to", ""))
        except ValueError:
            messages.error(request, "Pick two versions to compare.")
            return HttpResponseRedirect(reverse(f"admin:{self._name('history')}", args=[obj.pk]))
        try:
            changes = service.between(self.model, obj.pk, older, newer)
        except service.NoSuchVersion:
            raise Http404("No such version.") from None
        numbers = dict(self.model.history.filter(id=obj.pk).values_list("history_id", "version"))
        context = self._context(
            request,
            f"{obj}: version {numbers[older] or '(unnumbered)'} against {numbers[newer] or '(unnumbered)'}",
            original=obj,
            changes=changes,
        )
        return TemplateResponse(request, "admin/mcp_app/compare.html", context)

    def deleted_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        editable = editable_tenant_ids(request, self.edit_roles)
        entries = service.deleted(self.model, viewable_tenant_ids(request))
        context = self._context(
            request,
            f"Deleted {self.model._meta.verbose_name_plural}",
            entries=[(v, editable is None or v.tenant_id in editable) for v in entries],
        )
        return TemplateResponse(request, "admin/mcp_app/deleted.html", context)

    def restore_view(self, request: HttpRequest, history_id: int) -> HttpResponse:
        try:
            record = service.deletion(self.model, history_id, viewable_tenant_ids(request))
        except service.NoSuchVersion:
            raise Http404("No such deleted definition.") from None
        editable = editable_tenant_ids(request, self.edit_roles)
        if editable is not None and record.tenant_id not in editable:
            raise PermissionDenied
        try:
            restored = service.restore(record, request.user)
        except service.HistoryError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse(f"admin:{self._name('deleted')}"))
        note = (
            " Its secret headers are not kept in history: enter them again."
            if hasattr(restored, "handler_secrets")
            else ""
        )
        messages.success(request, f"{capfirst(self.model._meta.verbose_name)} {restored} is restored.{note}")
        return HttpResponseRedirect(reverse(f"admin:{self._name('change')}", args=[restored.pk]))

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        extra = {**(extra_context or {}), "deleted_url": reverse(f"admin:{self._name('deleted')}")}
        return super().changelist_view(request, extra)
