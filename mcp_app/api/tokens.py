"""`manage` access tokens for scripts and CI, stored by our authorization server (django-oauth-toolkit).

A token is an ordinary DOT AccessToken (only its SHA-256 is stored) of one confidential client,
"Management API", whose audience is the API alone (AMB-51): it opens /api/v1/ as its user, with that
user's roles, and no MCP endpoint accepts it. Its `ApiToken` row holds its name and last use (AMB-237).
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

from mcp_app.api.authentication import api_uri
from mcp_app.models import ApiToken
from mcp_app.oauth import scopes

NAME_LENGTH = 100

CLIENT_ID = "mcp-management-api"
CLIENT_NAME = "Management API (personal tokens)"


def api_client() -> Any:
    """The DOT client that holds every `manage` token issued here (created on first use)."""
    application = get_application_model()
    client, _created = application.objects.get_or_create(
        client_id=CLIENT_ID,
        defaults={
            "name": CLIENT_NAME,
            "client_type": application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": application.GRANT_CLIENT_CREDENTIALS,
            "redirect_uris": "",
        },
    )
    return client


def default_name() -> str:
    return f"Token of {timezone.now():%Y-%m-%d %H:%M} UTC"


def issue_manage_token(user: Any, days: int = 30, name: str = "") -> str:
    """Store a `manage` token of `user` valid for `days`, named `name`, and return its value (shown once,
    never stored)."""
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=user,
        application=api_client(),
        scope=scopes.MANAGE,
        expires=timezone.now() + timedelta(days=days),
        resource=[api_uri()],
    )
    set_token_value(token, raw)
    with transaction.atomic():
        token.save()
        ApiToken.objects.create(token=token, name=(name.strip() or default_name())[:NAME_LENGTH])
    return raw
