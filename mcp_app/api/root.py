"""`/api/v1/`: what the management API offers, as links (DRF's API root, in JSON), and where its docs are.

A person or a script that opens the API's base URL learns its resources without the OpenAPI document;
nothing here is a tenant's, so it answers without credentials (AMB-232). A tenant's resources are URL
templates with `{slug}`: the list of the caller's tenants is the one concrete link.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

# The per-tenant endpoints that are not router resources (mcp_app/api/urls.py), by the name listed.
TENANT_ACTIONS = {
    "settings": "",
    "export": "export",
    "import": "import",
    "import-openapi": "import-openapi",
    "history": "{kind}/{id}/history/",
}


def listing(request: Request, router: SimpleRouter) -> dict[str, Any]:
    """The root's body: the docs and schema, the tenants list, each tenant resource's URL template."""
    base = reverse("api:tenants", request=request)
    tenant_base = f"{base}{{slug}}/"
    resources = {prefix: f"{tenant_base}{prefix}/" for prefix, _viewset, _name in router.registry}
    resources.update({name: f"{tenant_base}{path}" for name, path in TENANT_ACTIONS.items()})
    return {
        "docs": reverse("api:docs", request=request),
        "schema": reverse("api:schema", request=request),
        "authentication": "A `manage` bearer token (made on /api-tokens or by `manage.py api_token`), "
        "or the admin's session with its CSRF token.",
        "tenants": base,
        "tenant_resources": resources,
    }


class ApiRoot(APIView):
    """GET /api/v1/: the API's resources as links, and its documentation page."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []  # public: a map of URLs, no tenant's data
    router: SimpleRouter | None = None

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="The API's resources and documentation")
    def get(self, request: Request) -> Response:
        assert self.router is not None
        return Response(listing(request, self.router))
