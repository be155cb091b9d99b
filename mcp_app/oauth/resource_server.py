"""The MCP endpoints as an OAuth 2.1 resource server: who is calling, from the bearer token.

The transport calls `authenticate` on every request and `check_scopes` on every POST; there is no
switch that turns them off. A `public` tenant ignores Authorization entirely; an `oauth` tenant needs
`Authorization: Bearer <token>` on every request (AU-30, AU-46), where the token is a DOT access token
bound to exactly this tenant's canonical URI (AU-41), unexpired, unrevoked, and held by an active
member of the tenant, or an API key of this tenant (`mcpk_…`, api_keys.py, AMB-202). A refusal is a `Refusal` (status, message, WWW-Authenticate); the transport
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
from mcp_app.oauth import api_keys, external_tokens, resources, scopes, tokens
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


async def authenticate(
    authorization: str | None, query: str, tenant: TenantInfo, address: str | None = None
) -> Caller:
    """Return the caller a request's bearer token (or API key) names; Refusal (400/401) for a missing or bad one.

    Fails closed: only a tenant whose mode is exactly `public` skips the token. ``address`` is the
    client's, which an API key's allow-list is checked against.
    """
    if tenant.auth_mode == AuthMode.PUBLIC:
        return PUBLIC
    if query:
        _refuse_query_credentials(query, tenant)
    token = bearer_token(authorization)
    if token is None:
        raise unauthorized(tenant)
    if not token:
        raise unauthorized(tenant, tokens.UNKNOWN)
    try:
        if api_keys.is_key(token):  # the tenant's own keys, whatever signs its people in
            grant = await api_keys.verify(token, tenant, address)
        elif tenant.identity is not None:
            return await _external(token, tenant)
        else:
            grant = await tokens.verify(token, tenant)
    except tokens.InvalidToken as refused:
        raise unauthorized(tenant, refused.reason) from None
    return Caller(user_id=grant.user_id, client_id=grant.client_id, scopes=grant.scopes, role=grant.role)


def _refuse_query_credentials(query: str, tenant: TenantInfo) -> None:
    """A token or key in the URL is refused, never read (OAuth 2.1 §5.2 drops RFC 6750 §2.3).

    URLs end up in logs and Referer headers: the answer is a malformed request (RFC 6750 §3.1
    invalid_request), and a key seen there is told to be revoked.
    """
    pairs = parse_qsl(query, True)
    if any(name == "access_token" for name, _ in pairs):
        description = "Access tokens are not accepted in the query string; send Authorization: Bearer."
    elif any(api_keys.is_key(value) for _, value in pairs):
        description = (
            "API keys are not accepted in the query string; send Authorization: Bearer. "
            "A key sent in a URL may be in logs now: revoke it and make another."
        )
    else:
        return
    raise Refusal(
        400,
        f"Bad request: {description}",
        [bearer_challenge(tenant, "invalid_request", description, BASE_SCOPE)],
    )


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
