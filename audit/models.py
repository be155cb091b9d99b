"""One security-relevant event: who, when, from where, which tenant. Append-only from the application.

The row keeps the actor's username and the tenant's slug as text, so an event still says who and where
after the user or tenant is deleted (their foreign keys are then set to NULL: the one change allowed).
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.db import models

from tenants.models import Tenant


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete an audit event from the application."""


class Action(models.TextChoices):
    SIGN_IN = "sign_in", "Signed in"
    SIGN_IN_FAILED = "sign_in_failed", "Sign-in failed"
    SIGN_IN_LOCKED_OUT = "sign_in_locked_out", "Sign-in locked out"
    SIGN_OUT = "sign_out", "Signed out"
    CONSENT_GRANTED = "consent_granted", "Consent granted"
    CONSENT_REVOKED = "consent_revoked", "Consent revoked"
    CLIENT_REGISTERED = "client_registered", "Client registered"
    CLIENT_REVOKED = "client_revoked", "Client revoked"
    CLIENT_DELETED = "client_deleted", "Client deleted"
    TOKEN_ISSUED = "token_issued", "API token issued"
    TOKEN_REVOKED = "token_revoked", "Token revoked"
    SERVICE_CLIENT_CREATED = "service_client_created", "Service client made"
    SERVICE_CLIENT_REVOKED = "service_client_revoked", "Service client revoked"
    API_KEY_CREATED = "api_key_created", "API key made"
    API_KEY_REVOKED = "api_key_revoked", "API key revoked"
    MEMBER_ADDED = "member_added", "Member added"
    MEMBER_ROLE_CHANGED = "member_role_changed", "Member's role changed"
    MEMBER_REMOVED = "member_removed", "Member removed"
    INVITATION_SENT = "invitation_sent", "Invitation sent"
    INVITATION_REVOKED = "invitation_revoked", "Invitation revoked"
    INVITATION_ACCEPTED = "invitation_accepted", "Invitation accepted"
    SECRETS_CHANGED = "secrets_changed", "Tool secrets changed"
    TENANT_CREATED = "tenant_created", "Tenant created"
    TENANT_SETTINGS_CHANGED = "tenant_settings_changed", "Tenant settings changed"
    TENANT_DELETED = "tenant_deleted", "Tenant deleted"
    TENANT_WALL_BYPASSED = "tenant_wall_bypassed", "Superuser worked across tenants"
    CONNECTION_MADE = "connection_made", "Account connected"
    CONNECTION_REMOVED = "connection_removed", "Account disconnected"
    CONNECTION_REFRESH_FAILED = "connection_refresh_failed", "Connected account's refresh failed"
    DEFINITIONS_PUBLISHED = "definitions_published", "Drafts published"
    DEFINITION_ROLLED_BACK = "definition_rolled_back", "Definition rolled back"


# The only update the application may make: deleting a user or tenant sets these to NULL (SET_NULL).
_NULLABLE_ON_DELETE = frozenset({"actor", "actor_id", "tenant", "tenant_id"})


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        if kwargs and set(kwargs) <= _NULLABLE_ON_DELETE and all(v is None for v in kwargs.values()):
            return super().update(**kwargs)
        raise AppendOnlyError("Audit events cannot be changed.")

    def delete(self) -> NoReturn:
        raise AppendOnlyError("Audit events cannot be deleted.")


class AuditEvent(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=40, choices=Action.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_username = models.CharField(max_length=150, blank=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tenant_slug = models.CharField(max_length=63, blank=True)
    client_id = models.CharField(max_length=2048, blank=True)
    source_address = models.GenericIPAddressField(null=True, blank=True)
    # Names and settings only: never a secret value, a password or a token.
    detail = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "created_at"], name="audit_tenant_time")]
        # The admin is read-only through has_*_permission; no add/change/delete permissions are needed.
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action} {self.actor_username or '-'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("Audit events cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("Audit events cannot be deleted.")
