"""Who may see or change which tenant: the one set of visibility helpers (admin, OAuth, API use these).

A user sees the tenants they are a member of, with their role there; an active superuser sees every
tenant as an owner; an inactive or anonymous user sees none. Everything else is derived from
`roles_of`, so the admin, the consent page and the resource server cannot disagree.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from tenants import wall
from tenants.models import EDIT_ROLES, Membership, Role, Tenant


def roles_of(user: Any) -> dict[int, str] | None:
    """Tenant id → role for `user`; None means every tenant, as owner (an active superuser)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return {}
    if user.is_superuser:
        return None
    return dict(Membership.objects.filter(user=user).values_list("tenant_id", "role"))


def wall_scope(user: Any) -> wall.Scope:
    """The tenants the database shows `user`'s requests: theirs, every one for an active superuser."""
    if user is None or not user.is_authenticated or not user.is_active:
        return wall.NOTHING
    if user.is_superuser:
        return wall.EVERYTHING
    # Memberships decide the wall, so they are read over it (this one query, nothing else).
    with wall.bypass("the signed-in user's tenants"):
        return wall.Scope.of(Membership.objects.filter(user=user).values_list("tenant_id", flat=True))


def role_of(user: Any, tenant: Tenant | int) -> str | None:
    """The user's role in the tenant, or None when they may not see it."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.OWNER
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    return Membership.objects.filter(user=user, tenant_id=tenant_id).values_list("role", flat=True).first()


def tenant_ids_for(user: Any, *, edit: bool = False, roles: frozenset[str] = EDIT_ROLES) -> set[int] | None:
    """Tenant ids the user may see (or, with edit=True, change with one of `roles`); None means all."""
    known = roles_of(user)
    if known is None:
        return None
    return {tenant_id for tenant_id, role in known.items() if not edit or role in roles}


def access_tenant(user: Any, slug: str, *, edit: bool = False) -> Tenant:
    """The tenant if the user is a member (an editor when edit=True); otherwise 404."""
    tenant = Tenant.objects.filter(slug=slug).first()
    role = role_of(user, tenant) if tenant is not None else None
    if tenant is None or role is None or (edit and role not in EDIT_ROLES):
        # Same answer as a missing tenant: no existence oracle.
        raise Http404("No such tenant.")
    return tenant


def no_member(username: str, tenant: Tenant) -> str:
    """The one answer for a name that is not an active member of ``tenant``: whether an account of that
    name exists elsewhere, is inactive or exists nowhere, an owner reads the same words (AMB-281)."""
    return f"No member {username[:150]!r} of {tenant.slug}."


def member_named(tenant: Tenant, username: str) -> Any:
    """The active member of ``tenant`` called ``username``, or None (never a non-member's account)."""
    membership = (
        Membership.objects.select_related("user")
        .filter(tenant=tenant, user__username=username, user__is_active=True)
        .first()
    )
    return membership.user if membership is not None else None
