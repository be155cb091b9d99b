"""What the caller may do in the tenant of the URL: read as a member, write as the view's roles allow.

The tenant is resolved once per request through tenants.access (the one visibility rule): a tenant
the caller may not see answers 404 exactly like a missing one; a member without the role for a
write gets 403 with a sentence saying which role it needs.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from tenants import access
from tenants.models import EDIT_ROLES, Role, Tenant

READ_METHODS = frozenset(permissions.SAFE_METHODS)


def tenant_of(request: Request, slug: str) -> tuple[Tenant, str]:
    """The URL's tenant and the caller's role there (cached on the request); 404 for a hidden tenant."""
    cached = getattr(request, "_api_tenant", None)
    if cached is not None and cached[0].slug == slug:
        return cached
    tenant = access.access_tenant(request.user, slug)
    role = access.role_of(request.user, tenant) or ""
    vars(request)["_api_tenant"] = (tenant, role)  # DRF's Request keeps it; read above
    return tenant, role


class TenantRole(permissions.BasePermission):
    """Any member reads (or one of the view's `read_roles`); a write needs one of its `write_roles`
    (definitions: owner or editor)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user is not None and request.user.is_authenticated):
            return False
        _tenant, role = tenant_of(request, view.kwargs["slug"])
        reading = request.method in READ_METHODS
        # Any member reads, unless the view names `read_roles` (invitations: owners, they hold addresses).
        roles = getattr(view, "read_roles", None) if reading else getattr(view, "write_roles", EDIT_ROLES)
        if roles is None or role in roles:
            return True
        self.message = (
            f"Your role in this tenant is {role}: {'seeing' if reading else 'changing'} this needs the role "
            + " or ".join(sorted(str(r) for r in roles))
            + "."
        )
        return False


OWNER_ONLY = frozenset({Role.OWNER})
