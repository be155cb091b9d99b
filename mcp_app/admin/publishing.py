"""Drafts in the definition admins: save as a draft, publish, discard, the drafts page (AMB-218..221).

A mixin of DefinitionAdmin (admin/definitions.py), beside the history mixin. The change form edits the
draft (`get_object` gives the row with its draft applied); Save keeps the form as the draft, "Save and
publish" makes it the next published version at once. The drafts page lists every draft of the
tenants the person may see and publishes a tenant's drafts as one change. Scoped like the change form:
another tenant's row is a 404, a viewer's POST a 403. The work is mcp_app/drafts/service.py's.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from mcp_app.admin.history import HistoryAdminMixin
from mcp_app.drafts import service as drafts
from tenants.admin import editable_tenant_ids, viewable_tenant_ids
from tenants.models import Tenant


class DraftFilter(admin.SimpleListFilter):
    title = "publishing"
    parameter_name = "draft"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "With a draft"), ("new", "Never published"), ("no", "Published, no draft")]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        if self.value() == "yes":
            return queryset.filter(models.Q(version=0) | models.Q(draft__isnull=False))
        if self.value() == "new":
            return queryset.filter(version=0)
        if self.value() == "no":
            return queryset.filter(version__gt=0, draft__isnull=True)
        return queryset


def _published_message(done: list[drafts.Published]) -> str:
    if len(done) == 1:
        return f"Published {done[0].label} as version {done[0].version}: connected clients are told."
    names = ", ".join(f"{d.label} (v{d.version})" for d in done)
    return f"Published {len(done)} drafts as one change: {names}. Connected clients are told once."


class PublishingAdminMixin(HistoryAdminMixin):
    """Draft-aware get_object and save_model, the status column, actions, publish/discard/drafts views
    (on top of the history pages: versions, compare, roll back)."""

    actions = ("publish_selected", "discard_selected")

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("drafts/", wrap(self.drafts_view), name=self._name("drafts")),
            path("<path:object_id>/draft/", wrap(self.draft_view), name=self._name("draft")),
            path(
                "<path:object_id>/discard/",
                wrap(require_POST(self.discard_view)),
                name=self._name("discard"),
            ),
            *super().get_urls(),
        ]

    # --- the form edits the draft ------------------------------------------------------------

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        return drafts.apply_draft(super().get_object(request, object_id, from_field))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        # A published definition stays in its tenant (its versions are that tenant's).
        return (*fields, "tenant") if obj is not None and obj.version > 0 else fields

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        self.ensure_may_edit(request, obj)
        try:
            drafts.stage(obj, request.user)
            # A policy's form asked already whether no member keeps a tool (Policy.confirm_no_tools).
            confirmed = bool(getattr(obj, "confirm_no_tools", False))
            done = drafts.publish(obj, request.user, confirm_no_tools=confirmed) if "_publish" in request.POST else None
        except drafts.PublishError as exc:
            messages.error(request, str(exc))
            return
        if done is not None:
            messages.success(request, _published_message([done]))
        elif obj.version == 0:
            messages.info(request, "Saved as a draft: no client sees it until it is published.")
        elif obj.draft:
            messages.info(
                request,
                f"Saved as a draft: clients still get version {obj.version} until it is published.",
            )

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        return super().response_change(_back_to_the_form(request), obj)

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
        return super().response_add(_back_to_the_form(request), obj, post_url_continue)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        # The row as stored, not as its draft shows it: the deletion announces its published URI.
        super().delete_model(request, type(obj).objects.get(pk=obj.pk))

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        if object_id is not None:
            obj = self.get_object(request, object_id)  # another tenant's: 404 like a missing one
            stored = type(obj).objects.get(pk=obj.pk)  # as published, the draft beside it
            extra["draft_status"] = drafts.status(stored)
            extra["draft_changes"] = drafts.changes(stored)
            extra["published_version"] = stored.version
        return super().changeform_view(request, object_id, form_url, extra)

    # --- the list --------------------------------------------------------------------------

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        extra = {**(extra_context or {}), "drafts_url": reverse(f"admin:{self._name('drafts')}")}
        return super().changelist_view(request, extra)

    @admin.display(description="status")
    def publishing(self, obj: Any) -> str:
        return drafts.status(obj)

    @admin.action(description="Publish the selected drafts")
    def publish_selected(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        rows = list(queryset)
        for row in rows:
            self.ensure_may_edit(request, row)
        try:
            done = drafts.publish_many(rows, request.user)
        except drafts.PublishError as exc:
            messages.error(request, f"{exc} Nothing was published.")
            return
        if done:
            messages.success(request, _published_message(done))
        elif rows:
            messages.info(request, "None of the selected definitions has a draft: nothing to publish.")

    @admin.action(description="Discard the selected drafts")
    def discard_selected(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        count = 0
        for row in queryset:
            self.ensure_may_edit(request, row)
            count += drafts.discard(row)
        messages.success(request, f"Discarded {count} draft(s): clients keep the published versions.")

    # --- views -----------------------------------------------------------------------------

    def draft_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """What the draft changes in the published version, field by field."""
        obj = self.get_object(request, object_id)  # another tenant's: 404 like a missing one
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        stored = type(obj).objects.get(pk=obj.pk)
        context = self._context(
            request,
            f"Draft of {obj}",
            original=obj,
            status=drafts.status(stored),
            changes=drafts.changes(stored),
            never_published=stored.version == 0,
        )
        return TemplateResponse(request, "admin/mcp_app/draft.html", context)

    def discard_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self.get_object(request, object_id)
        self.ensure_may_edit(request, obj)
        gone = obj.version == 0
        if not drafts.discard(obj):
            messages.info(request, f"Nothing to discard: {obj} has no draft.")
        elif gone:
            messages.success(request, f"Discarded the draft {obj}: it was never published, so it is gone.")
            return HttpResponseRedirect(reverse(f"admin:{self._name('changelist')}"))
        else:
            messages.success(request, f"Discarded the draft of {obj}: clients keep version {obj.version}.")
        return HttpResponseRedirect(reverse(f"admin:{self._name('change')}", args=[obj.pk]))

    def drafts_view(self, request: HttpRequest) -> HttpResponse:
        """Every draft of the tenants the person sees; POST publishes one tenant's drafts as one change."""
        visible = viewable_tenant_ids(request)
        editable = editable_tenant_ids(request, self.edit_roles)
        if request.method == "POST":
            tenant = Tenant.objects.filter(pk=request.POST.get("tenant") or 0).first()
            if tenant is None or (visible is not None and tenant.pk not in visible):
                raise Http404("No such tenant.")
            if editable is not None and tenant.pk not in editable:
                raise PermissionDenied
            try:
                done = drafts.publish_all(tenant, request.user, confirm_no_tools="confirm_no_tools" in request.POST)
            except drafts.PublishError as exc:
                messages.error(request, f"{exc} Nothing was published.")
            else:
                if done:
                    messages.success(request, _published_message(done))
                else:
                    messages.info(request, f"{tenant.slug} has no drafts: nothing to publish.")
            return HttpResponseRedirect(reverse(f"admin:{self._name('drafts')}"))
        tenants = Tenant.objects.order_by("slug")
        if visible is not None:
            tenants = tenants.filter(pk__in=visible)
        groups = []
        for tenant in tenants:
            rows = drafts.pending(tenant)
            if rows:
                entries = [
                    (row, row._meta.verbose_name, drafts.status(row), drafts.changes(row), _change_url(row))
                    for row in rows
                ]
                groups.append((tenant, entries, editable is None or tenant.pk in editable))
        context = self._context(request, "Drafts waiting to be published", groups=groups)
        return TemplateResponse(request, "admin/mcp_app/drafts.html", context)


def _back_to_the_form(request: HttpRequest) -> HttpRequest:
    """After "Save and publish", the form again (as "Save and continue editing"): it shows what was published."""
    if "_publish" in request.POST and "_continue" not in request.POST:
        post = request.POST.copy()
        post["_continue"] = "1"
        # The stubs type request.POST as immutable; Django replaces it with a copy like this itself.
        request.POST = post  # type: ignore[assignment]
    return request


def _change_url(row: Any) -> str:
    opts = row._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[row.pk])
