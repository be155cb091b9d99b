"""Who calls the API: the admin's session (DRF checks its CSRF token) or a `manage` bearer token.

A bearer token is a django-oauth-toolkit AccessToken of our own authorization server, checked by
DOT's DRF integration (known, unexpired, its client usable, its audience covering the request), and
then by us: its audience is exactly the API's URI and it holds the `manage` scope (AMB-51). A token
minted for a tenant's MCP endpoint (audience /t/<slug>/mcp) is refused here, and the MCP endpoints
refuse an API token (their audience check, mcp_app/oauth/tokens.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from rest_framework import exceptions
from rest_framework.request import Request

from mcp_app.models import ApiToken
from mcp_app.oauth import resources, scopes
from tenants import access, wall

API_PATH = "/api/v1"

NOT_FOR_API = (
    "The access token was not issued for this API (it needs the 'manage' scope and the API audience)."
)
INVALID = "The access token is unknown, revoked, expired or malformed."


def api_uri() -> str:
    """The API's canonical URI, the audience (RFC 8707 resource) of every `manage` token."""
    return resources.normalize(settings.MCP_PUBLIC_URL + API_PATH) or ""


def audience_covers(request_uri: str, audiences: list[str]) -> bool:
    """DOT's resource validator for the API: the request's path under the API, the token's audience it.

    The request's own scheme and host are not compared: behind a proxy they differ from the public
    URL, which alone names the API (as MCP_PUBLIC_URL alone names the MCP endpoints).
    """
    path = urlsplit(request_uri).path
    under_api = path == API_PATH or path.startswith(API_PATH + "/")
    return under_api and [resources.normalize(a) for a in audiences] == [api_uri()]


def is_manage_token(token: Any) -> bool:
    """True for an AccessToken bound to the API alone and holding the `manage` scope."""
    audience = [resources.normalize(a) for a in (token.resource or []) if isinstance(a, str)]
    return audience == [api_uri()] and scopes.MANAGE in (token.scope or "").split()


class ManageTokenAuthentication(OAuth2Authentication):
    """DOT's DRF bearer authentication, refusing every token that is not a `manage` API token."""

    www_authenticate_realm = "api"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header[:7].lower() != "bearer ":
            return None  # no token: the session may still authenticate
        found = super().authenticate(request)
        if found is None:
            description = (getattr(request, "oauth2_error", None) or {}).get("error_description")
            raise exceptions.AuthenticationFailed(NOT_FOR_API if description else INVALID)
        user, token = found
        if not is_manage_token(token):
            # Where DOT's authentication leaves its error, read by authenticate_header (WWW-Authenticate).
            vars(request)["oauth2_error"] = {"error": "invalid_token", "error_description": NOT_FOR_API}
            raise exceptions.AuthenticationFailed(NOT_FOR_API)
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed(INVALID)
        # The page middleware saw no user (the token is read here): the rest of the request runs in
        # the token holder's tenants; the middleware's own scope is restored when the request ends.
        wall.enter(access.wall_scope(user))
        mark_used(token)
        return user, token


# A token's last use is written at most once a minute: a script's burst of requests costs one write.
LAST_USED_STEP = timedelta(minutes=1)


def mark_used(token: Any) -> None:
    """Note that `token` opened a request now, for its owner's list (AMB-237)."""
    now = timezone.now()
    ApiToken.objects.filter(token_id=token.pk).filter(
        Q(last_used__isnull=True) | Q(last_used__lt=now - LAST_USED_STEP)
    ).update(last_used=now)
