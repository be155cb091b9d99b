"""``POST /api/v1/tenants/<slug>/check/``: the tenant's self-check report (mcp_app/selfcheck/, AMB-240).

A POST because it acts: it resolves hosts, calls the tools safe to call and asks the upstream servers.
Owners and editors (a viewer gets 403 saying so); a tenant the caller is not a member of answers the
404 of a missing one. The body is ``Report.as_dict()``: ``ok`` is false when a client would fail;
``joined`` is true when a check of the tenant was already running and this is its report (one at a
time per tenant, run off the serving loop: ``selfcheck/jobs.py``, AMB-276).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_app.api.permissions import TenantRole, tenant_of
from mcp_app.api.views import SLUG
from mcp_app.selfcheck import jobs


class SelfCheckView(APIView):
    """Check the tenant as its clients meet it: findings per definition, with where to fix each."""

    permission_classes = [IsAuthenticated, TenantRole]

    @extend_schema(parameters=[SLUG], request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        tenant, _role = tenant_of(request, slug)
        report = jobs.check(tenant.slug, tenant.pk)
        return Response(report.as_dict())
