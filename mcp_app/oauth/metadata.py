"""RFC 9728 protected resource metadata, one document per oauth tenant endpoint (AU-10..12).

Served at /.well-known/oauth-protected-resource/t/<slug>/mcp (the well-known suffix inserted before
the endpoint's path, RFC 9728 §3.1). Built on django-oauth-toolkit's view, whose get_* hooks are
meant for exactly this per-resource customisation.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from oauth2_provider.views.metadata import OAuthProtectedResourceMetadataView

from mcp_app.models import Tool
from mcp_app.oauth import resources, scopes
from tenants import wall
from tenants.models import AuthMode, Tenant

# Browser clients discover too; MCP clients send these on discovery requests.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
    "Access-Control-Allow-Headers": "MCP-Protocol-Version, Accept, Content-Type",
    "Access-Control-Max-Age": "86400",
}


def supported_scopes(tenant: Tenant | int) -> list[str]:
    """The base scopes, then every distinct scope an enabled tool of the tenant requires."""
    extra = Tool.objects.needing_scopes(tenant).values_list("required_scope", flat=True).distinct()
    return [*scopes.BASE_SCOPES, *sorted(set(extra) - set(scopes.BASE_SCOPES))]


class TenantResourceMetadataView(OAuthProtectedResourceMetadataView):
    """The metadata of one oauth tenant's MCP endpoint; 404 for unknown, inactive and public tenants."""

    tenant: Tenant

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "GET":
            # The same answer for an unknown, an inactive and a public tenant: nothing to discover.
            tenant = Tenant.objects.filter(slug=kwargs["slug"], is_active=True).first()
            if tenant is None or tenant.auth_mode == AuthMode.PUBLIC:
                raise Http404("No OAuth-protected MCP server is published here.")
            self.tenant = tenant
            wall.admit(tenant.pk)  # its tools' scopes are listed
        response = super().dispatch(request, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    def get_resource(self, request: HttpRequest) -> str:
        return resources.canonical_uri(self.tenant.slug)

    def get_authorization_servers(self, request: HttpRequest) -> list[str]:
        # A tenant with its own identity provider names it; ours beside it only if it kept ours (AMB-205).
        identity = self.tenant.identity if isinstance(self.tenant.identity, dict) else {}
        if not identity.get("issuer"):
            return [resources.issuer()]
        ours = [resources.issuer()] if identity.get("keep_platform_tokens") else []
        return [str(identity["issuer"]), *ours]

    def get_scopes_supported(self) -> list[str]:
        return supported_scopes(self.tenant)

    def get_bearer_methods_supported(self) -> list[str]:
        return ["header"]  # never query or body (AU-30)

    def get_resource_name(self) -> str:
        return self.tenant.title or self.tenant.name

    def get_resource_documentation(self) -> str:
        return self.tenant.website_url
