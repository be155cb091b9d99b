"""Site-wide pages that are no app's own."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme

from mcp_app.connect.page import is_open_to_anyone
from mcp_app.demo.seed import DEMO_SLUG
from mcp_app.oauth.resources import canonical_uri
from tenants.access import roles_of
from tenants.models import Tenant

# Per-tenant pages the front page links to when they exist (URL name → link text).
TENANT_PAGES = (("tenant-connect", "Connect a client"), ("tenant-dashboard", "Usage dashboard"))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Django's CSRF_FAILURE_VIEW: say in words why the form was refused and how to go on."""
    # The page the form came from, reloaded, gives a fresh token; a `next` carried by the form keeps the
    # authorization request the person was in the middle of.
    nxt = request.POST.get("next", "") if request.method == "POST" else ""
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        again = f"{request.path}?{urlencode({'next': nxt})}" if request.path.endswith("/login") else nxt
    else:
        again = request.get_full_path()
    return render(request, "csrf_failure.html", {"again": again, "reason": reason}, status=403)


def _url_or_none(name: str, slug: str) -> str | None:
    """The tenant page's URL, or None while no such page is wired (its link is then left out)."""
    try:
        return reverse(name, kwargs={"slug": slug})
    except NoReverseMatch:
        return None


def public_demo() -> dict[str, str] | None:
    """The demo tenant's name, MCP URL and connect page, when it exists and serves anyone (AMB-291)."""
    tenant = Tenant.objects.filter(slug=DEMO_SLUG).first()
    if tenant is None or not is_open_to_anyone(tenant):
        return None
    return {
        "name": tenant.title or tenant.name or tenant.slug,
        "mcp_url": canonical_uri(tenant.slug),
        "connect_url": reverse("tenant-connect", kwargs={"slug": tenant.slug}),
    }


def front(request: HttpRequest) -> HttpResponse:
    """`/` (AMB-72, AMB-291): what the platform is and its public demo; signed in, your tenants with
    their MCP URL and pages; staff: the admin."""
    user = request.user
    tenants: list[dict[str, Any]] = []
    if user.is_authenticated:
        roles = roles_of(user)  # None: a superuser, who sees every tenant as owner
        rows = Tenant.objects.order_by("slug")
        if roles is not None:
            rows = rows.filter(pk__in=roles)
        for tenant in rows:
            pages = [(text, _url_or_none(name, tenant.slug)) for name, text in TENANT_PAGES]
            tenants.append(
                {
                    "tenant": tenant,
                    "role": "owner" if roles is None else roles[tenant.pk],
                    "mcp_url": canonical_uri(tenant.slug),
                    "pages": [(text, url) for text, url in pages if url],
                }
            )
    context = {
        "tenants": tenants,
        "demo": public_demo(),
        "login_url": f"{reverse('oauth-login')}?{urlencode({'next': '/'})}",
        "is_staff": user.is_authenticated and user.is_active and user.is_staff,
    }
    return render(request, "front.html", context)
