"""The admin's "Add an upstream from a registry" (AMB-373): a search page, and the add form it fills.

The page reads one page of a registry (the official one unless the person names another) through
mcp_app/registry/client.py and shows each entry's remotes as the upstream they would make; "Use this"
opens the ordinary add form with ``registry``, ``registry_server``, ``registry_version`` and
``registry_remote`` in its query, and ``initial`` reads that entry again from the registry (never the
query's copy of it) to fill the name, URL, transport and prefix, telling the person which headers to
enter as secret headers. Saving is the add form's own (``full_clean``, history, audit); nothing is
published: the tools wait for a sync and the pinned review. Only people who may add upstreams see it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from mcp_app.registry import client
from mcp_app.registry.proposals import Proposal, propose


def search_page(model_admin: Any, request: HttpRequest) -> HttpResponse:
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    query = request.GET
    registry = query.get("registry", "").strip() or settings.MCP_REGISTRY_URL
    text = query.get("search", "")
    proposals: list[Proposal] = []
    error, next_cursor, skipped, searched = "", "", 0, "search" in query
    if searched:
        try:
            page = client.search(registry, text, query.get("cursor", ""))
        except client.RegistryError as exc:
            error = exc.message
        else:
            proposals = [propose(server) for server in page.servers]
            next_cursor, skipped = page.next_cursor, page.skipped
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Add an upstream from a registry",
        "registry": registry,
        "search": text,
        "searched": searched,
        "proposals": proposals,
        "error": error,
        "next_cursor": next_cursor,
        "skipped": skipped,
    }
    return TemplateResponse(request, "admin/mcp_app/upstream/registry.html", context)


def initial(request: HttpRequest) -> dict[str, Any]:
    """The add form's initial values from the registry entry the query names ({} when it names none)."""
    query = request.GET
    name = query.get("registry_server", "")
    if not name:
        return {}
    try:
        server = client.server_version(query.get("registry"), name, query.get("registry_version") or "latest")
    except client.RegistryError as exc:
        messages.error(request, f"The registry entry could not be read: {exc.message}")
        return {}
    proposal = propose(server)
    index = query.get("registry_remote", "0")
    remote = proposal.remotes[int(index)] if index.isdigit() and int(index) < len(proposal.remotes) else None
    if remote is None:
        messages.error(request, f"{proposal.server_name} has no such remote the platform can use.")
        return {}
    if remote.refused:
        messages.error(request, f"{proposal.server_name}: {remote.url}: {remote.refused}")
        return {}
    messages.info(request, f"Filled from {proposal.server_name} {proposal.version} in the registry. Save it, then "
                  "Sync now and review its tools: nothing is published until you do.")  # fmt: skip
    if remote.headers:
        wanted = "; ".join(
            f"{h.name}{' (required)' if h.required else ''}{': ' + h.description if h.description else ''}"
            for h in remote.headers
        )
        messages.warning(request, f"It needs these headers: enter them under Secret headers. {wanted}")
    return {"name": proposal.upstream_name, "url": remote.url, "transport": remote.transport, "prefix": proposal.prefix}
