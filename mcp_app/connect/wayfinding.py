"""Tenant URLs a person gets slightly wrong, answered with where to go (AMB-230, AMB-231).

- `/t/<slug>` (no page named): the tenant's connect page.
- A slug in the wrong case (`/t/Demo/mcp`, `/t/Demo`): slugs are lower-case (tenants/models.py), so a
  GET or HEAD is redirected to the same path lower-cased. Any other method (an MCP client's POST or
  DELETE) gets a 404 whose JSON-RPC error names the right URL: not a 308, so that a client configured
  with the wrong URL is told to fix it instead of following a redirect on every request with its bearer
  token, against a resource URL its token was not issued for.

The MCP endpoint itself (`/t/<slug>/mcp`, lower-case) is routed by transport/routing.py before Django;
a browser's GET there is sent to the connect page by transport/browsers.py.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt

from tenants.models import slug_validator

# A path segment that names a tenant with at least one upper-case letter (mcpsite/urls.py).
WRONG_CASE = r"^t/(?P<slug>[^/]*[A-Z][^/]*)(?P<rest>/.*)?$"


def tenant_home(request: HttpRequest, slug: str) -> HttpResponse:
    """`/t/<slug>` and `/t/<slug>/`: the connect page, which answers as it does for any visitor (AMB-290)."""
    return HttpResponseRedirect(f"/t/{slug}/connect")


@csrf_exempt  # the answer to a POST is a 404 that changes nothing
def wrong_case(request: HttpRequest, slug: str, rest: str | None = None) -> HttpResponse:
    """A tenant path whose slug has capitals: the lower-case path, or a 404 naming it."""
    lowered = slug.lower()
    try:
        slug_validator(lowered)
    except Exception:
        raise Http404("No such tenant.") from None
    path = f"/t/{lowered}{rest or ''}"
    if request.method in ("GET", "HEAD"):
        query = request.META.get("QUERY_STRING", "")
        return HttpResponseRedirect(f"{path}?{query}" if query else path)
    right = f"{settings.MCP_PUBLIC_URL}{path}"
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"Nothing is served at {request.path}: tenant addresses are lower-case. Use {right}",
            "data": {"url": right},
        },
    }
    return HttpResponse(json.dumps(body), status=404, content_type="application/json")
