"""What a person already granted a client for one MCP server: the consent page marks the rest "new".

A step-up (the client comes back for a tool's extra scope, after a 403 `insufficient_scope`) asks again
for every scope it needs; the person should see which one is the new ask (AMB-235). Granted means: an
access token of this person and client for this resource that is still valid, or one whose refresh
token is not revoked (the client can still renew it).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_app.oauth import resources


def granted_scopes(user: Any, application: Any, resource_uri: str) -> set[str]:
    """The scopes `user` has granted `application` for `resource_uri` and the client may still use."""
    if not getattr(user, "is_authenticated", False) or not resource_uri:
        return set()
    live = Q(expires__gt=timezone.now()) | Q(refresh_token__isnull=False, refresh_token__revoked__isnull=True)
    rows = (
        get_access_token_model()
        .objects.filter(live, user=user, application=application)
        .values_list("scope", "resource")
    )
    granted: set[str] = set()
    for scope, resource in rows:
        audience = {resources.normalize(uri) for uri in (resource or []) if isinstance(uri, str)}
        if resource_uri in audience:
            granted.update((scope or "").split())
    return granted


def mark_new(lines: list[dict[str, Any]], granted: set[str]) -> list[dict[str, Any]]:
    """Each line with `new`: asked for and not granted before (nothing is "new" on a first consent)."""
    for line in lines:
        line["new"] = bool(granted) and line["name"] not in granted
    return lines
