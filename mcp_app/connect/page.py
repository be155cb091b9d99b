"""A tenant's connect page (/t/<slug>/connect): its MCP URL, how to sign in, client configurations,
and what it serves exactly as a client sees it.

The lists are not a second rendering of the catalog: like the admin's Try page (admin/try_tool.py),
they are the answers of the one dispatcher to `tools/list`, `prompts/list`, `resources/list` and
`resources/templates/list`, once as a 2025-11-25 session and once as a 2026-07-28 request, every
page followed (AMB-64).

Who sees it (AMB-290): anyone, signed in or not, sees an active public tenant's page: its endpoint
answers anyone, and the page shows no more than a client of it learns (the lists are asked as an
anonymous caller). Members (any role) and superusers see their tenant's page in any mode and state.
Anyone else gets exactly what a missing tenant gives them: a stranger who is signed in the 404, an
anonymous one the site's sign-in page and back (a member who is not signed in yet comes back to it),
so a private or inactive tenant is never told apart from one that does not exist.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from mcp_app import catalog
from mcp_app.connect.configs import client_configs
from mcp_app.core.context import RequestContext, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import (
    LATEST,
    LATEST_MODERN,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from mcp_app.protocol.dispatch import dispatch
from tenants import access
from tenants.models import AuthMode, Tenant

TEMPLATE = "connect.html"
LIST_METHODS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
ERAS = ((LATEST, "legacy"), (LATEST_MODERN, "modern"))
# A tenant cannot hold more pages than this many; the bound only guards against a cursor loop.
MAX_PAGES = 100
CLIENT_INFO = {"name": "connect-page", "version": "1"}


@dataclass
class Listing:
    """One list method's answer in one era: every page's result as the client receives it."""

    method: str
    pages: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """The list's item key: tools, prompts, resources, resourceTemplates."""
        return {"resources/templates/list": "resourceTemplates"}.get(self.method, self.method.split("/")[0])

    @property
    def items(self) -> list[dict[str, Any]]:
        return [item for page in self.pages for item in page.get(self.key, [])]

    @property
    def names(self) -> list[str]:
        return [str(i.get("name") or i.get("uri") or i.get("uriTemplate") or "") for i in self.items]

    @property
    def text(self) -> str:
        shown = self.pages[0] if len(self.pages) == 1 else self.pages
        return json.dumps(self.error or shown, indent=2, ensure_ascii=False)


@dataclass
class Era:
    version: str
    label: str
    listings: list[Listing]


def _context(tenant: TenantInfo, version: str, user_id: int | None) -> RequestContext:
    # Every tool the server serves, in search mode too (AMB-376): the page shows a person what a client
    # may use, and the self-check checks each definition, not the three discovery tools.
    if version == LATEST_MODERN:
        return RequestContext(
            tenant=tenant, protocol_version=version, user_id=user_id, request_id=1, discovery="full"
        )
    session = SessionState(
        id=f"connect-page-{user_id}",
        tenant_id=tenant.id,
        protocol_version=version,
        initialized=True,
        user_id=user_id,
    )
    return RequestContext(
        tenant=tenant,
        protocol_version=version,
        session=session,
        user_id=user_id,
        request_id=1,
        discovery="full",
    )


def _message(version: str, method: str, cursor: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
    if version == LATEST_MODERN:
        # The 2026-07-28 envelope a client sends with every request (transport/envelope.py checks it).
        params["_meta"] = {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_CAPABILITIES: {},
            META_CLIENT_INFO: CLIENT_INFO,
        }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def list_all(tenant: TenantInfo, version: str, method: str, user_id: int | None) -> Listing:
    """Every page of one list method, asked through the dispatcher as a client of `version` asks."""
    listing = Listing(method)
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        response = await dispatch(_context(tenant, version, user_id), _message(version, method, cursor))
        assert response is not None  # a request always has a response
        if "error" in response:
            listing.error = response["error"]
            return listing
        listing.pages.append(response["result"])
        cursor = response["result"].get("nextCursor")
        if not cursor:
            break
    return listing


async def served(slug: str, user_id: int | None) -> list[Era] | None:
    """What the tenant serves in each era; None when it is inactive (its endpoint answers 404)."""
    tenant = await catalog.get_tenant(slug)
    if tenant is None:
        return None
    eras = []
    for version, label in ERAS:
        listings = await asyncio.gather(*(list_all(tenant, version, m, user_id) for m in LIST_METHODS))
        eras.append(Era(version, label, list(listings)))
    return eras


def is_open_to_anyone(tenant: Tenant) -> bool:
    """Whether the tenant's connect page is anyone's to see: its endpoint serves anyone."""
    return tenant.is_active and tenant.auth_mode == AuthMode.PUBLIC


@never_cache
def connect_page(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = Tenant.objects.filter(slug=slug).first()
    role = access.role_of(request.user, tenant) if tenant is not None else None
    if tenant is None or (role is None and not is_open_to_anyone(tenant)):
        if not request.user.is_authenticated:
            # Missing, private or inactive alike: the site's sign-in, then this page again.
            return redirect_to_login(request.get_full_path(), reverse("oauth-login"))
        raise Http404("No such tenant.")
    mcp_url = request.build_absolute_uri(f"/t/{tenant.slug}/mcp")
    oauth = tenant.auth_mode == AuthMode.OAUTH
    # A member's lists are the ones their client gets; anyone else's those of an anonymous client.
    caller = request.user.pk if role is not None else None
    context = {
        "tenant": tenant,
        "mcp_url": mcp_url,
        "oauth": oauth,
        "configs": client_configs(
            tenant.slug, mcp_url, oauth, str((tenant.identity or {}).get("issuer") or "")
        ),
        "eras": async_to_sync(served)(tenant.slug, caller),
        "role": role,
    }
    return render(request, TEMPLATE, context)
