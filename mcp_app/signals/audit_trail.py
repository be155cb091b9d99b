"""Audit events of mcp_app's own rows: clients registered and deleted, consent granted, tool secrets changed.

Model signals, so every way in (the admin, the API, imports, DCR, CIMD, the consent page) is covered by
one receiver each; the request being served, when there is one, gives the actor and the address
(audit.trail). Explicit `record` calls remain where no row says what happened: a client revoked in the
admin (oauth/admin.py), a tenant's consent revoked through the API (api/tenancy.py), and the token
revocation endpoint (oauth/revocation.py). Imported by McpAppConfig.ready.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from oauth2_provider.models import get_application_model, get_grant_model

from audit.models import Action
from audit.trail import record
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets
from mcp_app.models import Connection, Tool
from mcp_app.oauth.revocation import tenant_of_resource


@receiver(post_save, sender=get_application_model(), dispatch_uid="audit-client-registered")
def _client_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        detail = {"name": instance.name, "source": getattr(instance, "registration_source", "")}
        record(Action.CLIENT_REGISTERED, client_id=instance.client_id, detail=detail)


@receiver(post_delete, sender=get_application_model(), dispatch_uid="audit-client-deleted")
def _client_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    record(Action.CLIENT_DELETED, client_id=instance.client_id, detail={"name": instance.name})


@receiver(post_save, sender=get_grant_model(), dispatch_uid="audit-consent-granted")
def _consent_granted(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    # A grant (authorization code) is created only when a member presses Allow on the consent page.
    if created:
        record(
            Action.CONSENT_GRANTED,
            actor=instance.user,
            tenant=tenant_of_resource(instance.resource),
            client_id=instance.application.client_id,
            detail={"scopes": instance.scope.split()},
        )


def _names(token: str) -> dict[str, str] | None:
    try:
        return decrypt_secrets(token)
    except SecretsError:
        return None


@receiver(pre_save, sender=Tool, dispatch_uid="audit-secrets-before")
def _secrets_before(sender: Any, instance: Tool, raw: bool = False, **kwargs: Any) -> None:
    old = Tool.objects.filter(pk=instance.pk).values_list("handler_secrets", flat=True).first() if instance.pk else ""
    vars(instance)["_audit_old_secrets"] = old or ""  # never a column: read by _secrets_changed


@receiver(post_save, sender=Tool, dispatch_uid="audit-secrets-changed")
def _secrets_changed(sender: Any, instance: Tool, **kwargs: Any) -> None:
    old_token = getattr(instance, "_audit_old_secrets", "")
    new_token = instance.handler_secrets or ""
    if old_token == new_token:
        return
    old, new = _names(old_token) or {}, _names(new_token) or {}
    # Names only: which were added, removed, or given another value (compared, never recorded).
    detail = {
        "tool": instance.name,
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": sorted(name for name in set(old) & set(new) if old[name] != new[name]),
    }
    if detail["added"] or detail["removed"] or detail["changed"] or _names(old_token) is None:
        record(Action.SECRETS_CHANGED, tenant=instance.tenant, detail=detail)


@receiver(post_save, sender=Connection, dispatch_uid="audit-connection-made")
def _connection_made(sender: Any, instance: Connection, created: bool, **kwargs: Any) -> None:
    if created:
        detail = {"provider": instance.provider.name, "user": instance.user.get_username()}
        record(Action.CONNECTION_MADE, tenant=instance.tenant, detail=detail)


@receiver(post_delete, sender=Connection, dispatch_uid="audit-connection-removed")
def _connection_removed(sender: Any, instance: Connection, **kwargs: Any) -> None:
    # Whose connection and why (the vault names it: disconnected, invalid_grant, replaced; else an
    # owner's or a cascade's delete); the actor is whoever's request it was, if any.
    detail = {
        "provider": instance.provider.name,
        "user": instance.user.get_username(),
        "reason": getattr(instance, "drop_reason", "deleted"),
    }
    record(Action.CONNECTION_REMOVED, tenant=instance.tenant, detail=detail)
