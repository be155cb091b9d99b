"""The MCP endpoints as an OAuth 2.1 resource server: who is calling, from the bearer token.

Installed as the transport's authenticator (mcp_app.apps). A `public` tenant ignores Authorization
entirely; an `oauth` tenant needs `Authorization: Bearer <token>` on every request (AU-30, AU-46),
where the token is a DOT access token bound to exactly this tenant's canonical URI (AU-41), unexpired,
unrevoked, and held by an active member of the tenant.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from mcp_app.protocol.context import TenantInfo
from mcp_app.transport.auth import PUBLIC, Caller, bearer_challenge
from mcp_app.transport.wire import HttpError, Request
from tenants.models import AuthMode

from . import resources, scopes, tokens

# RFC 6750 §2.1 b64token; anything else after "Bearer " is not a token we could have issued.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_TOKEN_LENGTH = 4096
# What the 401 asks for: the base scopes; a tool's own scope is asked for when it is called (step-up).
BASE_SCOPE = " ".join(scopes.BASE_SCOPES)


def bearer_token(header: str | None) -> str | None:
    """Return the credentials of an `Authorization: Bearer` header ("" when malformed, None when absent).

    Another scheme (Basic, ...) counts as absent: the client did not know a bearer token is needed.
    """
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    credentials = credentials.strip()
    if len(credentials) > MAX_TOKEN_LENGTH or not _B64TOKEN.fullmatch(credentials):
        return ""  # also two Authorization headers, joined by ", "
    return credentials


def unauthorized(tenant: TenantInfo, description: str | None = None) -> HttpError:
    """401 with the challenge (AU-13); `error="invalid_token"` only when a token was sent (RFC 6750 §3.1)."""
    error = "invalid_token" if description else None
    message = (
        f"Unauthorized: {description}"
        if description
        else "Unauthorized: this MCP endpoint needs an OAuth access token (Authorization: Bearer <token>)."
    )
    return HttpError(
        401,
        f"{message} Discovery: {resources.protected_resource_metadata_url(tenant.slug)}",
        code=None,
        headers=[bearer_challenge(tenant, error, description, BASE_SCOPE)],
    )


async def authenticate(request: Request, tenant: TenantInfo) -> Caller:
    """Return the caller a request's bearer token names; raise 400/401 for a missing or bad one."""
    if tenant.auth_mode == AuthMode.PUBLIC:
        return PUBLIC
    if request.query and any(name == "access_token" for name, _ in parse_qsl(request.query, True)):
        # OAuth 2.1 §5.2 drops RFC 6750 §2.3 (tokens in URLs end up in logs and Referer headers):
        # an unsupported way of sending a token is a malformed request (RFC 6750 §3.1 invalid_request).
        description = "Access tokens are not accepted in the query string; send Authorization: Bearer."
        raise HttpError(
            400,
            f"Bad request: {description}",
            code=None,
            headers=[bearer_challenge(tenant, "invalid_request", description, BASE_SCOPE)],
        )
    token = bearer_token(request.header("authorization"))
    if token is None:
        raise unauthorized(tenant)
    if not token:
        raise unauthorized(tenant, tokens.UNKNOWN)
    grant = await tokens.verify(token, tenant)
    if isinstance(grant, str):
        raise unauthorized(tenant, grant)
    return Caller(user_id=grant.user_id, client_id=grant.client_id, scopes=grant.scopes)


def install() -> None:
    """Make every MCP endpoint check bearer tokens (called once the app registry is ready)."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save
    from oauth2_provider.models import get_access_token_model

    from mcp_app.transport import auth
    from tenants.models import Membership

    auth.set_authenticator(authenticate)
    access_token = get_access_token_model()
    for name, signal in (("save", post_save), ("delete", post_delete)):
        signal.connect(tokens.on_token_changed, sender=access_token, dispatch_uid=f"mcp-token-{name}")
        signal.connect(tokens.on_user_changed, sender=Membership, dispatch_uid=f"mcp-member-{name}")
        signal.connect(tokens.on_user_changed, sender=get_user_model(), dispatch_uid=f"mcp-user-{name}")
