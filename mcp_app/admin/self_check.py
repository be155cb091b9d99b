"""The admin's "Check this tenant" page and the self-check's warning after a definition is saved.

The page (``admin/tenants/tenant/<id>/check/``, mcpsite/urls.py) runs the whole self-check
(mcp_app/selfcheck/runner.py, AMB-240; in a process of its own, one at a time per tenant:
``selfcheck/jobs.py``, AMB-276) and lists its findings per definition, the worst first, each
with a link to the page that fixes it. Owners and editors of the tenant only: anyone else gets the 404
of a missing tenant (``admin.portability.editable_tenant``). It is linked from the tenant's change page
and the tools' list (``{% self_check_links %}``).

``SelfCheckOnSave``, mixed into every definition's ModelAdmin, checks the saved definition alone
(no network, AMB-243) and shows what a client would trip over as a warning; the save stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from mcp_app.admin.portability import editable_tenant
from mcp_app.selfcheck import jobs
from mcp_app.selfcheck.checks import check_one
from mcp_app.selfcheck.report import INFO, Report
from tenants.models import Tenant


def check_view(request: HttpRequest, tenant_id: int) -> HttpResponse:
    """Run the tenant's self-check now and show the report."""
    tenant, _role = editable_tenant(request, tenant_id)
    report: Report = jobs.check(tenant.slug, tenant.pk)
    context = {
        **admin.site.each_context(request),
        "opts": Tenant._meta,
        "title": f"Check {tenant.slug}: what would a client trip over?",
        "tenant": tenant,
        "tenant_url": reverse("admin:tenants_tenant_change", args=[tenant.pk]),
        "report": report,
        "groups": report.groups(),
        "tools_url": reverse("admin:mcp_app_tool_changelist") + f"?tenant__id__exact={tenant.pk}",
    }
    return TemplateResponse(request, "admin/self_check.html", context)


def urls() -> list[Any]:
    """The page, mounted at admin/tenants/tenant/<tenant_id>/ by mcpsite/urls.py."""
    return [path("check/", admin.site.admin_view(check_view), name="check")]


def warn_saved(request: HttpRequest, obj: Any) -> None:
    """A warning per finding of the saved definition a client would notice (infos stay on the page)."""
    to_def = getattr(obj, "to_def", None)
    if to_def is None or obj.pk is None:
        return
    found = [f for f in check_one(to_def()) if f.severity != INFO]
    for finding in found:
        messages.warning(request, f"Self-check ({finding.severity}): {finding.message}")
    if found:
        url = reverse("admin-self-check:check", args=[obj.tenant_id])
        messages.warning(request, format_html('Saved anyway. <a href="{}">Check the whole tenant</a>.', url))


# A mixin of a ModelAdmin: the type checker sees it as one (admin_site, get_object, permissions, super()).
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin
else:
    _AdminBase = object


class SelfCheckOnSave(_AdminBase):
    """Mixed into a definition's ModelAdmin: after a save, the self-check's warnings (never blocking)."""

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        warn_saved(request, obj)
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        warn_saved(request, obj)
        return super().response_change(request, obj)
