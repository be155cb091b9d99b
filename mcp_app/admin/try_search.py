"""The Try page of search mode (AMB-376): what `search_tools` or `browse_tools` gives a client of one
of the person's tenants for these words, played through the dispatcher as the signed-in member, in
search mode whatever the tenant chose (so an owner tries it before switching), in the era chosen.

Nothing runs but the search: viewers may use it. A tenant the person does not belong to is refused as
a missing one. Each tool found links to its own Try page; the JSON the client receives is shown too.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from mcp_app import catalog as catalogs
from mcp_app.admin import try_client
from mcp_app.core import ui_apps
from mcp_app.core.context import RequestContext
from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import LATEST
from mcp_app.models import Tool
from mcp_app.protocol.dispatch import dispatch
from tenants import access
from tenants.models import Tenant


def _tenants(request: HttpRequest) -> list[Tenant]:
    ids = access.tenant_ids_for(request.user)
    tenants = Tenant.objects.all() if ids is None else Tenant.objects.filter(id__in=ids)
    return list(tenants.order_by("slug"))


async def _search(
    tenant: TenantInfo, user_id: int, version: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    ctx = RequestContext(
        tenant=tenant,
        protocol_version=version,
        client_capabilities=ui_apps.with_support({}),
        user_id=user_id,
        request_id=1,
        discovery="search",
    )
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await dispatch(ctx, message)
    assert response is not None
    return response


def search_page(model_admin: Any, request: HttpRequest) -> HttpResponse:
    if not model_admin.has_view_permission(request) or request.user.pk is None:
        raise PermissionDenied
    tenants = _tenants(request)
    query = request.GET
    chosen = query.get("tenant", "")
    tenant = (
        next((t for t in tenants if t.slug == chosen), None)
        if chosen
        else (tenants[0] if len(tenants) == 1 else None)
    )
    if chosen and tenant is None:
        raise Http404("No such tenant.")
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "opts": Tool._meta,
        "title": "Search tools as a client",
        "tenants": tenants,
        "tenant": tenant,
        "query": query.get("q", ""),
        "upstream": query.get("upstream", ""),
        "eras": try_client.ERAS,
        "era": query.get("era", LATEST),
    }
    browse = "browse" in query
    if tenant is not None and (context["query"].strip() or browse):
        if context["era"] not in try_client.ERAS:
            context["problem"] = f"Choose a protocol revision among {', '.join(try_client.ERAS)}."
            return TemplateResponse(request, "admin/mcp_app/tool/try_search.html", context)
        info = async_to_sync(catalogs.get_tenant)(tenant.slug)
        if info is None:
            raise Http404("No such tenant.")
        name, arguments = "search_tools", {"query": context["query"]}
        if browse:
            name, arguments = (
                "browse_tools",
                ({"upstream": context["upstream"]} if context["upstream"] else {}),
            )
        response = async_to_sync(_search)(info, int(request.user.pk), context["era"], name, arguments)
        context["body"] = json.dumps(
            response.get("result", response.get("error")), indent=2, ensure_ascii=False
        )
        result = response.get("result") or {}
        if "error" in response or result.get("isError"):
            context["problem"] = (response.get("error") or {}).get("message") or result["content"][0]["text"]
        else:
            found = json.loads(result["content"][0]["text"])
            rows = {
                t.name: t.pk
                for t in Tool.objects.filter(tenant=tenant, name__in=[f["name"] for f in found["tools"]])
            }
            context["found"] = [
                {
                    **f,
                    "try_url": reverse("admin:mcp_app_tool_try", args=[rows[f["name"]]])
                    if f["name"] in rows
                    else "",
                }
                for f in found["tools"]
            ]
            context["searched"] = True
    return TemplateResponse(request, "admin/mcp_app/tool/try_search.html", context)
