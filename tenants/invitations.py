"""Invitations into a tenant (AMB-105..107): invite an address and mail its link, revoke, accept.

Inviting never looks an account up, so its answer and its mail are the same whatever the address.
The link carries a signed token (`django.core.signing`, its own salt) naming the row and its address;
the row's state makes it single-use. Accepting works across the tenant wall: the person is not a
member yet, and the signed token is what lets them in.
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import BaseUserManager
from django.core import signing
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from tenants import wall
from tenants.models import EDIT_ROLES, GrantedBy, Invitation, Membership, Tenant

logger = logging.getLogger("tenants.invitations")

SALT = "tenants.invitation"
HOUR = timedelta(hours=1)


class InvitationError(Exception):
    """A refusal with a sentence for people."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TooManyInvitations(InvitationError):
    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AlreadyPending(InvitationError):
    pass


class NotSent(InvitationError):
    pass


class NotPending(InvitationError):
    pass


class WrongAccount(InvitationError):
    pass


def normalize(email: str) -> str:
    return BaseUserManager.normalize_email(email.strip())


def same_address(a: str, b: str) -> bool:
    return bool(a) and bool(b) and a.strip().casefold() == b.strip().casefold()


def token_for(invitation: Invitation) -> str:
    return signing.dumps({"id": invitation.pk, "email": invitation.email.casefold()}, salt=SALT)


def link_for(invitation: Invitation) -> str:
    """The link mailed: built from MCP_PUBLIC_URL, the URL people reach (never the request's host)."""
    return f"{settings.MCP_PUBLIC_URL}{reverse('invitation', args=[token_for(invitation)])}"


def _retry_after(recent: Any, limit: int, now: Any) -> int | None:
    if recent.count() < limit:
        return None
    oldest = recent.order_by("created_at").values_list("created_at", flat=True).first()
    return max(1, int((oldest + HOUR - now).total_seconds()) + 1)


def _check_rate(tenant: Tenant, invited_by: Any) -> None:
    limit = settings.MCP_INVITATIONS_PER_HOUR
    if not limit:
        return
    now = timezone.now()
    recent = Invitation.objects.filter(created_at__gt=now - HOUR)
    wait = _retry_after(recent.filter(tenant=tenant), limit, now)
    if wait is None and invited_by is not None:
        wait = _retry_after(recent.filter(invited_by=invited_by), limit, now)
    if wait is not None:
        minutes = max(1, round(wait / 60))
        raise TooManyInvitations(
            f"Too many invitations: at most {limit} an hour. Try again in about {minutes} minute"
            f"{'s' if minutes != 1 else ''}.",
            wait,
        )


def invite(tenant: Tenant, email: str, role: str, invited_by: Any) -> Invitation:
    """Make an invitation and mail its link; the same outcome whether or not the address has an account."""
    email = normalize(email)
    with transaction.atomic():
        # Locking the tenant's row makes concurrent invitations count one after the other.
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
        _check_rate(tenant, invited_by)
        if Invitation.objects.pending().filter(tenant=tenant, email__iexact=email).exists():
            raise AlreadyPending(
                f"An invitation to {email} is pending already: revoke it first to send another."
            )
        invitation = Invitation.objects.create(
            tenant=tenant,
            email=email,
            role=role,
            invited_by=invited_by,
            expires_at=timezone.now() + timedelta(days=settings.MCP_INVITATION_DAYS),
        )
        _send(invitation)
    return invitation


def _send(invitation: Invitation) -> None:
    context = {"invitation": invitation, "tenant": invitation.tenant, "link": link_for(invitation)}
    subject = f"You are invited to {invitation.tenant.title or invitation.tenant.name}"
    try:
        send_mail(subject, render_to_string("invitations/email.txt", context), None, [invitation.email])
    except (OSError, smtplib.SMTPException):
        # Raised inside the transaction: the invitation is undone, nobody holds a link to it.
        logger.warning("invitation e-mail to tenant %s not sent", invitation.tenant.slug, exc_info=True)
        raise NotSent("The invitation e-mail could not be sent; nothing was saved. Try again later.") from None


def revoke(invitation: Invitation) -> Invitation:
    """Withdraw a pending invitation (its link then shows a "withdrawn" page)."""
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.status != Invitation.Status.PENDING:
            raise NotPending(f"This invitation is {locked.status}: only a pending one can be revoked.")
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
    return locked


@dataclass(frozen=True)
class Link:
    """What a link names: its invitation (None when the link is not one of ours) and its state."""

    invitation: Invitation | None
    status: str


INVALID = Link(None, "invalid")


def resolve(token: str) -> Link:
    """The invitation a link names and its state ("invalid" for a link we never signed)."""
    try:
        data = signing.loads(token, salt=SALT, max_age=timedelta(days=settings.MCP_INVITATION_DAYS))
        expired = False
    except signing.SignatureExpired:
        data, expired = signing.loads(token, salt=SALT), True
    except signing.BadSignature:
        return INVALID
    if not isinstance(data, dict):
        return INVALID
    invitation_id = data.get("id")
    if not isinstance(invitation_id, int):
        return INVALID
    with wall.bypass("an invitation link names its tenant"):
        invitation = (
            Invitation.objects.select_related("tenant", "invited_by").filter(pk=invitation_id).first()
        )
    if invitation is None or invitation.email.casefold() != data.get("email"):
        return INVALID
    status = invitation.status
    if expired and status == Invitation.Status.PENDING:
        status = Invitation.Status.EXPIRED
    return Link(invitation, status)


def accept(invitation: Invitation, user: Any) -> tuple[Membership, bool]:
    """Make `user` a member with the invitation's role, once; (membership, created).

    An existing member keeps their role. Owners and editors become staff: the admin is where they work.
    """
    with wall.bypass("accepting an invitation"), transaction.atomic():
        locked = Invitation.objects.select_for_update().select_related("tenant").get(pk=invitation.pk)
        if locked.status != Invitation.Status.PENDING:
            raise NotPending(f"This invitation is {locked.status}.")
        if not same_address(getattr(user, "email", ""), locked.email):
            raise WrongAccount(f"This invitation is for {locked.email}.")
        membership, created = Membership.objects.get_or_create(
            user=user, tenant=locked.tenant, defaults={"role": locked.role, "granted_by": GrantedBy.INVITATION}
        )
        if not created and membership.granted_by == GrantedBy.SSO:
            # Accepted by hand now: single sign-on no longer takes it away (AMB-213).
            membership.granted_by = GrantedBy.INVITATION
            membership.save(update_fields=["granted_by"])
        locked.accepted_at = timezone.now()
        locked.accepted_by = user
        locked.save(update_fields=["accepted_at", "accepted_by"])
        if created and locked.role in EDIT_ROLES and not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
    return membership, created
