"""The registry API's v0.1 read endpoints over the listed tenants, and each one's own server.json (AMB-372).

``GET /v0.1/servers`` (``search``: a substring of the name, any case; ``cursor``; ``limit`` 1-100, 30 by
default; ``updated_since``: RFC 3339; ``version``: ``latest`` or one exact version), ``GET
/v0.1/servers/<name>/versions``, ``GET /v0.1/servers/<name>/versions/<version or latest>`` (the name's
slash URL-encoded or not: a name has exactly one), and ``GET /t/<slug>/server.json``. Anyone may read
them, as any registry's reads: nothing here is more than the tenant's connect page already says.

A tenant is listed while its owner says so and it is active; an unlisted, inactive or missing one answers
the same 404 (the spec's ``{"error": ...}``), so the registry tells nobody which slugs exist. Bad input is
a 400 in that shape. The cursor is the last name of the page before: opaque to clients, stable under
inserts, and a page is one indexed query whatever the number of tenants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Value
from django.db.models.functions import Concat
from django.http import HttpRequest, JsonResponse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET

from mcp_app.oauth import ratelimit as oauth_ratelimit
from mcp_app.registry import names
from mcp_app.registry.server_json import entry, server_json
from tenants.models import Tenant

DEFAULT_LIMIT = 30
MAX_LIMIT = 100
MAX_SEARCH = 200
NOT_FOUND = "Server not found"


class BadRequest(Exception):
    """A query parameter the endpoint cannot use; the message says which and why."""


def _answer(body: dict[str, Any], status: int = 200) -> JsonResponse:
    response = JsonResponse(body, status=status, json_dumps_params={"ensure_ascii": False})
    # Public reads, as the official registry's: a browser gallery on any origin may read them, with no
    # credentials (none are looked at here).
    response["Access-Control-Allow-Origin"] = "*"
    response["Cache-Control"] = "public, max-age=60" if status == 200 else "no-store"
    return response


def _error(status: int, message: str) -> JsonResponse:
    return _answer({"error": message}, status)


View = Callable[..., JsonResponse]


def _limited(view: View) -> View:
    """At most MCP_REGISTRY_READS_PER_MINUTE reads an address, shared by every process with Redis
    (oauth/ratelimit.py's windows): past it a 429 in the spec's error shape, with Retry-After."""

    @functools.wraps(view)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        address = oauth_ratelimit.client_address(request)
        wait = oauth_ratelimit.retry_after("registry", address, settings.MCP_REGISTRY_READS_PER_MINUTE)
        if wait is not None:
            refused = _error(429, f"Too many registry reads from this address; retry in {wait} s.")
            refused["Retry-After"] = str(wait)
            return refused
        return view(request, *args, **kwargs)

    return limited


# What a server.json and its entry read of a tenant: a page of 100 loads no other column (a tenant's
# identity, SSO rules and the rest are JSON a public flood would otherwise have decoded for nothing).
DESCRIBED_BY = (
    "slug", "name", "title", "description", "server_version", "website_url", "icons", "auth_mode",
    "created_at", "updated_at",
)  # fmt: skip


def listed() -> QuerySet[Tenant]:
    """Every tenant the registry shows, in name order (one namespace: slug order)."""
    return Tenant.objects.filter(registry_listed=True, is_active=True).order_by("slug").only(*DESCRIBED_BY)


def _listed_tenant(name: str) -> Tenant | None:
    slug = names.slug_of(name)
    return listed().filter(slug=slug).first() if slug else None


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    return int(raw)


def _filtered(request: HttpRequest) -> tuple[QuerySet[Tenant], int]:
    query = request.GET
    tenants = listed()
    limit = _limit(query.get("limit"))
    if cursor := query.get("cursor", ""):
        slug = names.slug_of(cursor)
        if slug is None:
            raise BadRequest("cursor is not one this registry gave: use metadata.nextCursor as it came.")
        tenants = tenants.filter(slug__gt=slug)
    if search := query.get("search", ""):
        if len(search) > MAX_SEARCH:
            raise BadRequest(f"search is longer than {MAX_SEARCH} characters.")
        # The spec's search is a substring of the name: the namespace is part of it.
        tenants = tenants.annotate(server_name=Concat(Value(names.namespace() + "/"), "slug")).filter(
            server_name__icontains=search
        )
    if since := query.get("updated_since", ""):
        try:
            moment = parse_datetime(since)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise BadRequest(
                "updated_since must be an RFC 3339 date-time with its offset, e.g. 2025-08-07T13:15:04Z."
            )
        tenants = tenants.filter(updated_at__gte=moment)
    if (version := query.get("version", "")) and version != "latest":
        tenants = tenants.filter(server_version=version)
    return tenants, limit


@require_GET
@_limited
def servers(request: HttpRequest) -> JsonResponse:
    """One page of the listed servers."""
    try:
        tenants, limit = _filtered(request)
    except BadRequest as exc:
        return _error(400, str(exc))
    page = list(tenants[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    metadata: dict[str, Any] = {"count": len(page)}
    if more:
        metadata["nextCursor"] = names.server_name(page[-1].slug)
    return _answer({"servers": [entry(t) for t in page], "metadata": metadata})


@require_GET
@_limited
def versions(request: HttpRequest, name: str) -> JsonResponse:
    """Every version of one server: the platform serves one, its current."""
    tenant = _listed_tenant(name)
    if tenant is None:
        return _error(404, NOT_FOUND)
    return _answer({"servers": [entry(tenant)], "metadata": {"count": 1}})


@require_GET
@_limited
def version(request: HttpRequest, name: str, version: str) -> JsonResponse:
    """One version of one server, ``latest`` naming the current."""
    tenant = _listed_tenant(name)
    if tenant is None:
        return _error(404, NOT_FOUND)
    if version not in ("latest", tenant.server_version):
        return _error(404, "Server version not found")
    return _answer(entry(tenant))


@require_GET
@_limited
def tenant_server_json(request: HttpRequest, slug: str) -> JsonResponse:
    """The tenant's server.json at a URL of its own, beside its MCP URL."""
    tenant = listed().filter(slug=slug).first()
    if tenant is None:
        return _error(404, NOT_FOUND)
    return _answer(server_json(tenant))


def not_found(request: HttpRequest) -> JsonResponse:
    """Any other path under /v0.1/: the same 404 as a server that is not listed."""
    return _error(404, NOT_FOUND)
