"""Events this app hooks itself: sign-in and sign-out (Django's auth signals, django-axes' lockout),
memberships, invitations and tenant settings (their model signals). mcp_app hooks its own models (mcp_app/signals/audit_trail.py).

Connected by AuditConfig.ready; each receiver has a dispatch_uid so a second import connects nothing.
"""

from __future__ import annotations

from typing import Any

from axes.signals import user_locked_out
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models import Model
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.http import HttpRequest

from audit.models import Action
from audit.trail import MAX_TEXT, record
from tenants.models import GrantedBy, Invitation, Membership, Tenant

# Tenant fields that change on their own, not as settings.
_NOT_SETTINGS = frozenset({"id", "definitions_version", "created_at", "updated_at", "identity_client_secret"})


@receiver(user_logged_in, dispatch_uid="audit-sign-in")
def _signed_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    record(Action.SIGN_IN, request=request, actor=user, detail={"path": getattr(request, "path", "")})
    if user.is_superuser:
        # The database's tenant wall lets a superuser's requests through (AMB-96): said once per sign-in.
        record(Action.TENANT_WALL_BYPASSED, request=request, actor=user, detail={"via": "sign-in"})


@receiver(user_login_failed, dispatch_uid="audit-sign-in-failed")
def _sign_in_failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kw: Any) -> None:
    # Django already masks the password in `credentials`; only the username is kept.
    username = str(credentials.get("username") or "")
    record(
        Action.SIGN_IN_FAILED,
        request=request,
        actor_username=username,
        detail={"path": getattr(request, "path", "")},
    )


@receiver(user_locked_out, dispatch_uid="audit-sign-in-locked-out")
def _locked_out(sender: Any, request: HttpRequest | None, username: str | None, **kwargs: Any) -> None:
    record(Action.SIGN_IN_LOCKED_OUT, request=request, actor_username=str(username or ""))


@receiver(user_logged_out, dispatch_uid="audit-sign-out")
def _signed_out(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if user is not None:
        record(Action.SIGN_OUT, request=request, actor=user)


# A pre_save receiver keeps the row's old values on the instance (in its __dict__, never a column) for
# the post_save one: `vars(instance)[name]`, read back with getattr(instance, name, default).
@receiver(pre_save, sender=Membership, dispatch_uid="audit-membership-before")
def _membership_before(sender: Any, instance: Membership, **kwargs: Any) -> None:
    vars(instance)["_audit_old_role"] = (
        Membership.objects.filter(pk=instance.pk).values_list("role", flat=True).first() if instance.pk else None
    )


def _member_detail(instance: Membership) -> dict[str, Any]:
    detail = {"member": instance.user.get_username(), "role": instance.role}
    if instance.granted_by == GrantedBy.SSO:
        # Given or taken by the tenant's single sign-on rule at the person's sign-in (AMB-213).
        detail["via"] = "sso"
    return detail


@receiver(post_save, sender=Membership, dispatch_uid="audit-membership-saved")
def _membership_saved(sender: Any, instance: Membership, created: bool, **kwargs: Any) -> None:
    old = getattr(instance, "_audit_old_role", None)
    if created or old is None:
        record(Action.MEMBER_ADDED, tenant=instance.tenant, detail=_member_detail(instance))
    elif old != instance.role:
        detail = {**_member_detail(instance), "old_role": old}
        record(Action.MEMBER_ROLE_CHANGED, tenant=instance.tenant, detail=detail)


@receiver(post_delete, sender=Membership, dispatch_uid="audit-membership-deleted")
def _membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    record(Action.MEMBER_REMOVED, tenant=instance.tenant, detail=_member_detail(instance))


@receiver(pre_save, sender=Invitation, dispatch_uid="audit-invitation-before")
def _invitation_before(sender: Any, instance: Invitation, **kwargs: Any) -> None:
    old = Invitation.objects.filter(pk=instance.pk).values("accepted_at", "revoked_at").first() if instance.pk else None
    vars(instance)["_audit_old_state"] = old


@receiver(post_save, sender=Invitation, dispatch_uid="audit-invitation-saved")
def _invitation_saved(sender: Any, instance: Invitation, created: bool, **kwargs: Any) -> None:
    """Sent, revoked or accepted: the row's state moving (AMB-108); the address is the owner's own input."""
    old = getattr(instance, "_audit_old_state", None) or {"accepted_at": None, "revoked_at": None}
    detail = {"email": instance.email, "role": instance.role}
    if created:
        record(Action.INVITATION_SENT, tenant=instance.tenant, detail={**detail, "expires_at": instance.expires_at})
    elif instance.accepted_at is not None and old["accepted_at"] is None:
        record(Action.INVITATION_ACCEPTED, tenant=instance.tenant, detail=detail)
    elif instance.revoked_at is not None and old["revoked_at"] is None:
        record(Action.INVITATION_REVOKED, tenant=instance.tenant, detail=detail)


def _settings(tenant: Model) -> dict[str, Any]:
    return {f.attname: getattr(tenant, f.attname) for f in Tenant._meta.concrete_fields if f.name not in _NOT_SETTINGS}


@receiver(pre_save, sender=Tenant, dispatch_uid="audit-tenant-before")
def _tenant_before(sender: Any, instance: Tenant, **kwargs: Any) -> None:
    old = Tenant.objects.filter(pk=instance.pk).first() if instance.pk else None
    vars(instance)["_audit_old_settings"] = _settings(old) if old is not None else None


@receiver(post_save, sender=Tenant, dispatch_uid="audit-tenant-saved")
def _tenant_saved(sender: Any, instance: Tenant, created: bool, **kwargs: Any) -> None:
    old = getattr(instance, "_audit_old_settings", None)
    if created or old is None:
        record(Action.TENANT_CREATED, tenant=instance, detail={"auth_mode": instance.auth_mode})
        return
    new = _settings(instance)
    # Old and new values: a tenant's settings hold no secrets (quotas, auth mode, origins, ttl...).
    changed = {name: [old[name], value] for name, value in new.items() if old.get(name) != value}
    if changed:
        detail = {"changed": {k: [_short(v) for v in pair] for k, pair in changed.items()}}
        record(Action.TENANT_SETTINGS_CHANGED, tenant=instance, detail=detail)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[: MAX_TEXT - 1] + "…"
    return value


@receiver(post_delete, sender=Tenant, dispatch_uid="audit-tenant-deleted")
def _tenant_deleted(sender: Any, instance: Tenant, **kwargs: Any) -> None:
    record(Action.TENANT_DELETED, tenant=instance, detail={"slug": instance.slug})
