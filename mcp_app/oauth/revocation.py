"""RFC 7009 token revocation (django-oauth-toolkit's view), recorded in the audit trail.

DOT sends no signal for a revocation, and a token row's deletion also happens on every refresh
(rotation), so the endpoint itself says when a client revoked a token: it existed before the call and
is no longer live after it. Only the kind of token is recorded, never its value.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.views import RevokeTokenView

from audit.models import Action
from audit.trail import record
from mcp_app.oauth import resources, tokens
from tenants.models import Tenant


def tenant_of_resource(resource: Any) -> Tenant | None:
    """The tenant a token's or grant's audience names (the first one of ours), or None."""
    values = resource if isinstance(resource, list) else [resource]
    for value in values:
        slug = resources.slug_for_resource(value) if isinstance(value, str) else None
        if slug:
            return Tenant.objects.filter(slug=slug).first()
    return None


def _live_token(value: str) -> tuple[str, Any, Any] | None:
    """(kind, row, audience) of the live access or refresh token with this value, or None."""
    checksum = tokens.checksum(value)
    access = get_access_token_model().objects.filter(token_checksum=checksum)
    row = access.select_related("application", "user").first()
    if row is not None:
        return "access_token", row, row.resource
    refresh = get_refresh_token_model().objects.filter(token_checksum=checksum, revoked__isnull=True)
    row = refresh.select_related("application", "user", "access_token").first()
    if row is not None:
        return "refresh_token", row, getattr(row.access_token, "resource", None)
    return None


class McpRevokeTokenView(RevokeTokenView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        value = request.POST.get("token") or ""
        before = _live_token(value) if value else None
        response = super().post(request, *args, **kwargs)
        if before is not None and response.status_code == 200 and _live_token(value) is None:
            kind, row, audience = before
            record(
                Action.TOKEN_REVOKED,
                request=request,
                actor=row.user,
                tenant=tenant_of_resource(audience),
                client_id=row.application.client_id if row.application else "",
                detail={"token_type": kind},
            )
        return response
