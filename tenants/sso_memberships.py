"""Memberships from single sign-on (AMB-213): each tenant's owner says whose people become members.

A tenant's rule is its `sso_email_domains` (the domain of a verified e-mail address) and `sso_groups`
(a group the identity provider asserts), giving `sso_role` (viewer or editor, never owner). At every
single sign-on the person gets a membership of each tenant whose rule matches and loses the ones single
sign-on gave them whose rule no longer does; a membership given by hand or by invitation is never
touched (`Membership.granted_by`). The identity provider's word is taken only as far as it was
verified: an unverified address matches no domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from tenants import wall
from tenants.models import EDIT_ROLES, GrantedBy, Membership, Role, SsoRole, Tenant
from tenants.sso_rules import email_domain


@dataclass(frozen=True)
class Identity:
    """What the identity provider asserted, as far as we believe it."""

    email: str
    email_verified: bool
    groups: frozenset[str] = field(default_factory=frozenset)

    @property
    def verified_domain(self) -> str:
        return email_domain(self.email) if self.email_verified else ""


def matches(tenant: Tenant, identity: Identity) -> bool:
    domain = identity.verified_domain
    if domain and domain in {d.lower() for d in tenant.sso_email_domains or []}:
        return True
    return bool(identity.groups & set(tenant.sso_groups or []))


@dataclass
class Outcome:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def sync_memberships(user: Any, identity: Identity) -> Outcome:
    """Give and take the memberships single sign-on decides for `user`; slugs added and removed."""
    outcome = Outcome()
    with wall.bypass("single sign-on maps memberships"), transaction.atomic():
        candidates = Tenant.objects.exclude(sso_email_domains=[], sso_groups=[])
        wanted = {t.pk: t for t in candidates if matches(t, identity)}
        held = {m.tenant_id: m for m in Membership.objects.select_for_update().filter(user=user)}
        for tenant_id, tenant in wanted.items():
            if tenant_id in held:
                continue  # a role given by hand, or edited by an owner since, is theirs to keep
            role = tenant.sso_role if tenant.sso_role in SsoRole.values else Role.VIEWER
            # get_or_create: the same person's sign-in in another tab may have made it a moment ago.
            _, created = Membership.objects.get_or_create(
                user=user, tenant=tenant, defaults={"role": role, "granted_by": GrantedBy.SSO}
            )
            if created:
                outcome.added.append(tenant.slug)
        for tenant_id, membership in held.items():
            if membership.granted_by == GrantedBy.SSO and tenant_id not in wanted:
                outcome.removed.append(membership.tenant.slug)
                membership.delete()
        gives_edit = Membership.objects.filter(
            user=user, granted_by=GrantedBy.SSO, role__in=EDIT_ROLES
        ).exists()
        if gives_edit and not user.is_staff:
            # As an accepted invitation does: the admin is where editors work (AMB-106).
            user.is_staff = True
            user.save(update_fields=["is_staff"])
    return outcome
