"""A tenant's Export button, Import page (dry-run diff, then confirm) and OpenAPI import page.

Mounted under the tenant's admin URL (``admin/tenants/tenant/<id>/…``, mcpsite/urls.py) and wrapped
by ``admin.site.admin_view`` (signed-in staff); only owners and editors of that tenant get a page,
anyone else the same 404 as a missing tenant. Between the two steps of a page the document travels
in the form itself (a hidden field), so the confirmed import is exactly the one whose diff was shown.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from mcp_app.catalog.apart import Unfinished, run_apart
from mcp_app.portability.document import DocumentError, dumps, export_tenant, loads
from mcp_app.portability.importer import import_document
from mcp_app.portability.limits import refuse_large
from mcp_app.portability.openapi import OpenApiError
from mcp_app.portability.openapi_tools import Settings, fetch, import_operations, read
from tenants import access
from tenants.models import EDIT_ROLES, Role, Tenant


def editable_tenant(request: HttpRequest, tenant_id: int) -> tuple[Tenant, str]:
    """The tenant and the user's role, if they own or edit it; 404 otherwise (no existence oracle)."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    role = access.role_of(request.user, tenant) if tenant is not None else None
    if tenant is None or role not in EDIT_ROLES:
        raise Http404("No such tenant.")
    return tenant, role


def _context(request: HttpRequest, tenant: Tenant, title: str, **extra: Any) -> dict[str, Any]:
    return {
        **admin.site.each_context(request),
        "opts": Tenant._meta,
        "title": title,
        "tenant": tenant,
        "tenant_url": reverse("admin:tenants_tenant_change", args=[tenant.pk]),
        **extra,
    }


def _uploaded_text(request: HttpRequest, field: str = "document") -> str:
    """The uploaded file's text, or the hidden field's (second step); DocumentError when unusable."""
    upload = request.FILES.get(field)
    if upload is None:
        text = request.POST.get(f"{field}_text", "")
        refuse_large(len(text.encode()))
        return text
    refuse_large(upload.size or 0)  # an uploaded file has its size
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentError([("(document)", "The file is not UTF-8 text.")]) from None


def export_view(request: HttpRequest, tenant_id: int) -> HttpResponse:
    """Download the tenant's document (YAML, or JSON with ?format=json)."""
    tenant, _role = editable_tenant(request, tenant_id)
    fmt = "json" if request.GET.get("format") == "json" else "yaml"
    response = HttpResponse(
        dumps(export_tenant(tenant), fmt),
        content_type="application/json" if fmt == "json" else "application/yaml; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}.{fmt}"'
    return response


def import_view(request: HttpRequest, tenant_id: int) -> HttpResponse:
    """Upload → the dry-run diff → Confirm: the import, in one transaction."""
    tenant, role = editable_tenant(request, tenant_id)
    context = _context(request, tenant, f"Import definitions into {tenant.slug}")
    if request.method != "POST":
        return TemplateResponse(request, "admin/portability/import.html", context)
    prune = request.POST.get("prune") == "on"
    confirm = request.POST.get("step") == "confirm"
    try:
        text = _uploaded_text(request)
        if not text.strip():
            raise DocumentError([("(document)", "Choose a file to import.")])
        # Thousands of rows checked and written: in a process of its own, not this server's (AMB-277).
        plan = run_apart(
            partial(
                import_document,
                tenant,
                loads(text),
                prune=prune,
                dry_run=not confirm,
                user=request.user,
                may_change_settings=role == Role.OWNER,
            )
        )
    except DocumentError as exc:
        context["problems"] = exc.problems
        return TemplateResponse(request, "admin/portability/import.html", context, status=400)
    except Unfinished as exc:
        context["problems"] = [("(document)", f"{exc} Try again.")]
        return TemplateResponse(request, "admin/portability/import.html", context, status=503)
    if confirm:
        counts = plan.counts()
        messages.success(
            request,
            f"Imported: {counts['create']} created, {counts['change']} changed, {counts['delete']} deleted, "
            f"{counts['unchanged']} unchanged."
            + "".join(
                f" Tool {t} needs the secret {n!r}: set it on the tool." for t, n in plan.missing_secrets
            )
            + "".join(
                f" Upstream {u} needs the secret {n!r}: set it on the upstream."
                for u, n in plan.missing_upstream_secrets
            ),
        )
        return HttpResponseRedirect(context["tenant_url"])
    context.update(plan=plan, document_text=text, prune=prune)
    return TemplateResponse(request, "admin/portability/import.html", context)


def openapi_view(request: HttpRequest, tenant_id: int) -> HttpResponse:
    """Upload or URL → the operations to choose, the base URL, auth header and timeout → the tools."""
    tenant, _role = editable_tenant(request, tenant_id)
    context = _context(request, tenant, f"Import an OpenAPI description into {tenant.slug}")
    if request.method != "POST":
        return TemplateResponse(request, "admin/portability/openapi.html", context)
    source_url = request.POST.get("source_url", "").strip()
    try:
        text = _uploaded_text(request)
        if not text.strip() and source_url:
            raw, source_url = fetch(source_url)
            text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            raise OpenApiError("Upload an OpenAPI document or give its URL.")
        description = read(text, source_url)
    except (OpenApiError, DocumentError) as exc:
        context["problems"] = exc.problems if isinstance(exc, DocumentError) else [("(document)", str(exc))]
        return TemplateResponse(request, "admin/portability/openapi.html", context, status=400)
    context.update(description=description, document_text=text, source_url=source_url)
    if request.POST.get("step") != "create":
        context["form"] = {
            "base_url": (description.servers or [""])[0],
            "timeout": "30",
            "auth_header": "Authorization",
        }
        return TemplateResponse(request, "admin/portability/openapi.html", context)
    form = {k: request.POST.get(k, "").strip() for k in ("base_url", "timeout", "auth_header")}
    context.update(form=form, chosen=request.POST.getlist("operations"))
    try:
        timeout = float(form["timeout"] or "30")
    except ValueError:
        timeout = -1.0
    settings = Settings(form["base_url"], timeout, form["auth_header"], request.POST.get("auth_value", ""))
    if not settings.auth_value:
        settings.auth_header = ""  # no value: nothing to store, the tools keep what they have
    try:
        outcome = run_apart(import_operations, tenant, description, context["chosen"], settings, request.user)
    except DocumentError as exc:
        context["problems"] = exc.problems
        return TemplateResponse(request, "admin/portability/openapi.html", context, status=400)
    except Unfinished as exc:
        context["problems"] = [("(document)", f"{exc} Try again.")]
        return TemplateResponse(request, "admin/portability/openapi.html", context, status=503)
    messages.success(
        request,
        f"OpenAPI import: {len(outcome.created)} tool(s) created, {len(outcome.updated)} updated, "
        f"{len(outcome.unchanged)} unchanged.",
    )
    return HttpResponseRedirect(reverse("admin:mcp_app_tool_changelist") + f"?tenant__id__exact={tenant.pk}")


def urls() -> list[Any]:
    """The pages, mounted at admin/tenants/tenant/<tenant_id>/ by mcpsite/urls.py."""
    wrap = admin.site.admin_view
    return [
        path("export/", wrap(export_view), name="export"),
        path("import/", wrap(import_view), name="import"),
        path("import-openapi/", wrap(openapi_view), name="import-openapi"),
    ]
