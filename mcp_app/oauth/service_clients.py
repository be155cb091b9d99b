"""Service clients: programs with no browser get tokens for one tenant by the client credentials grant.

A tenant's owner makes one (`create`, used by `manage.py service_client` and the tenant admin): a
confidential DOT Application whose only grant is client credentials, bound by a `ServiceClient` row to
the tenant, to the member it acts as (the Application's user) and to the most scope its tokens carry.
Our token endpoint (validators.py) asks `token_request` whether a client credentials request may have
a token, and for what: only for that tenant's endpoint (the `resource`, which may be left out), only
within that scope, only while the user is an active member; the token is then an ordinary access token
of that user, so the resource server checks it as any other (AMB-197). Dynamic registration never
creates one: anyone may register, only an owner may give a program a member's access.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from oauth2_provider.models import get_application_model
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749 import errors

from audit.models import Action
from audit.trail import record
from mcp_app.models import Tool
from mcp_app.oauth import resources, scopes
from tenants import wall
from tenants.models import AuthMode, Membership, ServiceClient, Tenant

GRANT = "client_credentials"


@dataclass(frozen=True)
class Made:
    """A new service client: its id and its secret (shown once; only a hash is stored)."""

    client_id: str
    client_secret: str
    row: ServiceClient


def problem(tenant: Tenant, user: Any, scope: str) -> str | None:
    """Why ``user`` cannot have a service client of ``tenant`` with ``scope`` (None: it can)."""
    if tenant.auth_mode != AuthMode.OAUTH:
        return f"Tenant {tenant.slug} is public: its endpoint needs no token."
    if not is_member(user, tenant):
        return f"{user} is not a member of {tenant.slug}: a service client acts as a member."
    unknown = sorted(set(scope.split()) - grantable(tenant))
    if unknown:
        return f"Not a scope of {tenant.slug}: {', '.join(unknown)}."
    return None


def create(tenant: Tenant, user: Any, name: str, scope: str = "", created_by: Any = None) -> Made:
    """A service client of ``tenant`` acting as ``user`` (a member) with at most ``scope`` (default: the base scopes).

    Raises ValueError with a readable message when ``user`` is not a member or a scope is not the tenant's.
    """
    wanted = scope.split() or list(scopes.BASE_SCOPES)
    if (why := problem(tenant, user, " ".join(wanted))) is not None:
        raise ValueError(why)
    application = get_application_model()
    raw = secrets.token_urlsafe(32)
    with transaction.atomic():
        app = application.objects.create(
            name=name[:255] or f"Service client of {tenant.slug}",
            client_type=application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=application.GRANT_CLIENT_CREDENTIALS,
            client_secret=raw,  # hashed on save
            user=user,
            redirect_uris="",
        )
        row = ServiceClient.objects.create(
            tenant=tenant, application=app, scope=" ".join(sorted(set(wanted))), created_by=created_by
        )
        record(
            Action.SERVICE_CLIENT_CREATED,
            actor=created_by,
            tenant=tenant,
            client_id=app.client_id,
            detail={"acts_as": user.get_username(), "scope": row.scope},
        )
    return Made(client_id=app.client_id, client_secret=raw, row=row)


def is_member(user: Any, tenant: Tenant) -> bool:
    """An active member by a Membership row, as the resource server counts one (a superuser is not one)."""
    return user is not None and user.is_active and Membership.objects.filter(user=user, tenant=tenant).exists()


def grantable(tenant: Tenant) -> set[str]:
    """What a service client of ``tenant`` may carry: the base scopes and its tools' own (no offline_access)."""
    return set(scopes.BASE_SCOPES) | set(
        Tool.objects.needing_scopes(tenant).values_list("required_scope", flat=True)
    )


def revoke(row: ServiceClient, actor: Any = None) -> None:
    """Delete the client: its Application, and with it its tokens and this row."""
    client_id, tenant = row.application.client_id, row.tenant
    with transaction.atomic():
        row.application.delete()
        record(Action.SERVICE_CLIENT_REVOKED, actor=actor, tenant=tenant, client_id=client_id)


def binding(client: Any) -> ServiceClient | None:
    """The ServiceClient of an authenticated client, read across the wall (its tenant is not known yet)."""
    with wall.bypass("a client credentials request names its tenant through its client"):
        return (
            ServiceClient.objects.select_related("tenant", "application__user")
            .filter(application=client)
            .first()
        )


def token_request(request: Request, requested: list[str]) -> ServiceClient:
    """Check a client credentials token request; set its `resource` and `scopes`; return the binding.

    Raises the OAuth error the client should see (RFC 6749 §5.2, RFC 8707 §2).
    """
    row = binding(request.client)
    if row is None:
        raise errors.UnauthorizedClientError(
            description="Only a tenant's service client may use the client credentials grant.",
            request=request,
        )
    tenant = row.tenant
    if not tenant.is_active or tenant.auth_mode != AuthMode.OAUTH:
        raise errors.InvalidGrantError(
            description="This client's MCP server no longer takes tokens.", request=request
        )
    wall.admit(tenant.pk)
    canonical = resources.canonical_uri(tenant.slug)
    named = [resources.normalize(value) or value for value in requested]
    if any(value != canonical for value in named):
        raise errors.CustomOAuth2Error(
            error="invalid_target",
            description=f"This client's tokens are for {canonical} only.",
            status_code=400,
            request=request,
        )
    user = row.application.user
    if not is_member(user, tenant):
        raise errors.InvalidGrantError(
            description="The member this client acts as is no longer a member of its MCP server.",
            request=request,
        )
    allowed = set(row.scope.split()) & grantable(tenant)
    asked = set(request.scopes or []) or allowed
    if not asked <= allowed:
        raise errors.InvalidScopeError(
            description=f"This client may ask for at most: {' '.join(sorted(allowed))}.", request=request
        )
    vars(request)["resource"] = [canonical]  # DOT binds the token to it (oauthlib's request takes any attribute)
    request.scopes = sorted(asked)
    return row
