"""Permission-checked fetches of tenants (Zulip-style access_* helpers)."""

from __future__ import annotations

from django.http import Http404

from tenants.models import EDIT_ROLES, Membership, Role, Tenant


def role_of(user, tenant: Tenant) -> str | None:  # noqa: ANN001
    """Return the user's role in the tenant, or None."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Role.OWNER
    return Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True).first()


def access_tenant(user, slug: str, *, edit: bool = False) -> Tenant:  # noqa: ANN001
    """Return the tenant if the user is a member (an editor when edit=True); otherwise 404."""
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    role = role_of(user, tenant)
    if role is None or (edit and role not in EDIT_ROLES):
        # Same answer as a missing tenant: no existence oracle.
        raise Http404("No such tenant.")
    return tenant


def tenant_ids_for(user, *, edit: bool = False) -> set[int] | None:  # noqa: ANN001
    """Tenant ids the user may see (or edit); None means all (superuser)."""
    if user.is_superuser:
        return None
    qs = Membership.objects.filter(user=user)
    if edit:
        qs = qs.filter(role__in=list(EDIT_ROLES))
    return set(qs.values_list("tenant_id", flat=True))
