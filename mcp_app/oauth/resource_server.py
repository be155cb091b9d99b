"""The MCP endpoints as an OAuth 2.1 resource server: who is calling, from the bearer token.

The transport calls `authenticate` on every request and `check_scopes` on every POST; there is no
switch that turns them off. A `public` tenant ignores Authorization entirely; an `oauth` tenant needs
`Authorization: Bearer <token>` on every request (AU-30, AU-46), where the token is a DOT access token
bound to exactly this tenant's canonical URI (AU-41), unexpired, unrevoked, and held by an active
member of the tenant. A refusal is a `Refusal` (status, message, WWW-Authenticate); the transport
turns it into its HTTP answer.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from urllib.parse import parse_qsl

from oauth2_provider.www_authenticate import build_bearer_challenge

from mcp_app.core.context import PUBLIC, Caller
from mcp_app.core.types import TenantInfo
from mcp_app.oauth import external_tokens, resources, scopes, tokens
from tenants.models import AuthMode

WWW_AUTHENTICATE = b"www-authenticate"
Header = tuple[bytes, bytes]


class Refusal(Exception):
    """The request may not go on: answer `status` with `message` and these headers (a challenge)."""

    def __init__(self, status: int, message: str, headers: list[Header]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


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


def unauthorized(tenant: TenantInfo, description: str | None = None) -> Refusal:
    """401 with the challenge (AU-13); `error="invalid_token"` only when a token was sent (RFC 6750 §3.1)."""
    error = "invalid_token" if description else None
    message = (
        f"Unauthorized: {description}"
        if description
        else "Unauthorized: this MCP endpoint needs an OAuth access token (Authorization: Bearer <token>)."
    )
    return Refusal(
        401,
        f"{message} Discovery: {resources.protected_resource_metadata_url(tenant.slug)}",
        [bearer_challenge(tenant, error, description, BASE_SCOPE)],
    )


async def authenticate(authorization: str | None, query: str, tenant: TenantInfo) -> Caller:
    """Return the caller a request's bearer token names; Refusal (400/401) for a missing or bad one.

    Fails closed: only a tenant whose mode is exactly `public` skips the token.
    """
    if tenant.auth_mode == AuthMode.PUBLIC:
        return PUBLIC
    if query and any(name == "access_token" for name, _ in parse_qsl(query, True)):
        # OAuth 2.1 §5.2 drops RFC 6750 §2.3 (tokens in URLs end up in logs and Referer headers):
        # an unsupported way of sending a token is a malformed request (RFC 6750 §3.1 invalid_request).
        description = "Access tokens are not accepted in the query string; send Authorization: Bearer."
        raise Refusal(
            400,
            f"Bad request: {description}",
            [bearer_challenge(tenant, "invalid_request", description, BASE_SCOPE)],
        )
    token = bearer_token(authorization)
    if token is None:
        raise unauthorized(tenant)
    if not token:
        raise unauthorized(tenant, tokens.UNKNOWN)
    if tenant.identity is not None:
        return await _external(token, tenant)
    try:
        grant = await tokens.verify(token, tenant)
    except tokens.InvalidToken as refused:
        raise unauthorized(tenant, refused.reason) from None
    return Caller(user_id=grant.user_id, client_id=grant.client_id, scopes=grant.scopes)


async def _external(token: str, tenant: TenantInfo) -> Caller:
    """The tenant's own identity provider's token (AMB-203): 401 refused, 503 when it cannot be asked."""
    try:
        return await external_tokens.authenticate(token, tenant)
    except tokens.InvalidToken as refused:
        raise unauthorized(tenant, refused.reason) from None
    except external_tokens.Unavailable as down:
        raise Refusal(
            503, f"Service unavailable: {down.reason} Try again shortly.", [(b"retry-after", b"5")]
        ) from None


def bearer_challenge(
    tenant: TenantInfo, error: str | None = None, description: str | None = None, scope: str | None = None
) -> Header:
    """Return a `WWW-Authenticate: Bearer` header naming the tenant's metadata URL (RFC 9728 §5.1)."""
    params: OrderedDict[str, str] = OrderedDict()
    if error:
        params["error"] = error
    if description:
        params["error_description"] = description
    if scope:
        params["scope"] = scope
    url = resources.protected_resource_metadata_url(tenant.slug)
    value = build_bearer_challenge(None, params, resource_metadata_url=url)
    return WWW_AUTHENTICATE, value.encode("latin-1", "replace")


def check_scopes(
    caller: Caller, tenant: TenantInfo, needed: set[str], tools_needing: Sequence[str] = ()
) -> None:
    """Refuse (403 insufficient_scope) a POST whose requests need scopes the token lacks.

    `needed`: the scopes of every request in the POST (the method table says which, protocol.dispatch);
    `tools_needing`: the tools called whose own required scope the token lacks, named in the message.
    A batch is refused as a whole: the client steps up once and sends it again.
    """
    if caller.scopes is None:
        return
    missing = needed - caller.scopes
    if not missing:
        return
    listed = " ".join(sorted(missing))
    what = f"Calling tool {tools_needing[0][:64]!r} needs" if tools_needing else "This request needs"
    description = f"{what} the scope(s) {listed}, which the access token lacks."
    # The scopes granted so far are listed too, so re-authorizing does not lose them (2025-11-25).
    wanted = " ".join(sorted(needed | caller.scopes))
    raise Refusal(
        403,
        f"Insufficient scope: {description} Re-authorize with: {wanted}",
        [bearer_challenge(tenant, "insufficient_scope", description, wanted)],
    )
