"""Helpers of the resource-server tests: DOT clients and access tokens made directly in the database."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

from mcp_app.oauth import resources, scopes
from mcp_app.streams import events, sessions, standalone
from tenants.models import Tenant
from tests.transport.support import Client

ALL_SCOPES = " ".join(scopes.BASE_SCOPES)


def make_application(name: str = "Test client") -> Any:
    """A public authorization-code client, as dynamic registration would create it."""
    application = get_application_model()
    return application.objects.create(
        name=name,
        client_type=application.CLIENT_PUBLIC,
        authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9999/callback",
    )


def issue_token(
    user: Any,
    tenant: Tenant | None,
    application: Any,
    scope: str = ALL_SCOPES,
    expires_in: int = 3600,
    resource: list[str] | None = None,
) -> str:
    """Store an access token the way the authorization server does (checksum only) and return it."""
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=user,
        application=application,
        scope=scope,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=resource if resource is not None else [resources.canonical_uri(tenant.slug)],
    )
    set_token_value(token, raw)
    token.save()
    return raw


class AuthClient(Client):
    """The transport tests' client, sending `Authorization: Bearer <token>` on every request."""

    def __init__(self, slug: str = "tenant-a", token: str | None = None) -> None:
        super().__init__(slug)
        self.token = token

    def session_headers(self) -> dict[str, str]:
        headers = super().session_headers()
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        return headers


def forget_transport_state() -> None:
    sessions.reset()
    events.reset()
    standalone._local.clear()
