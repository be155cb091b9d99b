"""Where the transport asks who is calling; the OAuth resource-server check plugs in here.

Until an authenticator is installed every tenant endpoint is public. An authenticator takes the
request and the tenant and returns a Caller, or raises wire.HttpError(401, ..., headers=[WWW-Authenticate]).
The installed one is mcp_app.oauth.resource_server.authenticate (set in mcp_app.apps).

Once a caller is known, `check_scopes` refuses messages its token's scopes do not cover (403,
RFC 6750 §3.1 / MCP 2025-11-25 step-up) and `owns` tells whether a session belongs to it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from oauth2_provider.www_authenticate import build_bearer_challenge

from mcp_app.oauth import resources, scopes
from mcp_app.protocol.context import SessionState, TenantInfo

from .wire import HttpError, Request

WWW_AUTHENTICATE = b"www-authenticate"


@dataclass(frozen=True)
class Caller:
    user_id: int | None = None
    client_id: str | None = None
    scopes: frozenset[str] | None = None  # None: public endpoint, nothing scope-limited


PUBLIC = Caller()

Authenticator = Callable[[Request, TenantInfo], Awaitable[Caller]]

_authenticator: Authenticator | None = None


def set_authenticator(fn: Authenticator | None) -> None:
    """Install the function every MCP request is authenticated with (None: public)."""
    global _authenticator
    _authenticator = fn


async def authenticate(request: Request, tenant: TenantInfo) -> Caller:
    if _authenticator is None:
        return PUBLIC
    return await _authenticator(request, tenant)


def owns(session: SessionState, caller: Caller) -> bool:
    """A session belongs to the user and the OAuth client that opened it (both None on public tenants)."""
    return session.user_id == caller.user_id and session.client_id == caller.client_id


def bearer_challenge(
    tenant: TenantInfo, error: str | None = None, description: str | None = None, scope: str | None = None
) -> tuple[bytes, bytes]:
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


def _method_scope(message: dict[str, Any]) -> str | None:
    method = message["method"]
    if method == "completion/complete":
        # Completions reveal a prompt's or a template's values: they need that family's scope.
        params = message.get("params") or {}
        ref = params.get("ref") if isinstance(params, dict) else None
        kind = ref.get("type") if isinstance(ref, dict) else None
        return {"ref/prompt": scopes.PROMPTS, "ref/resource": scopes.RESOURCES}.get(kind)
    return scopes.METHOD_SCOPES.get(method)


def check_scopes(caller: Caller, tenant: TenantInfo, messages: Iterable[Any]) -> None:
    """Refuse (403 insufficient_scope) a POST any of whose requests the token's scopes do not cover.

    A batch is refused as a whole: the client steps up once and sends it again.
    """
    if caller.scopes is None:
        return
    needed: set[str] = set()
    tools_needing: list[str] = []
    tool_scopes: dict[str, str] | None = None
    for message in messages:
        if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
            continue  # notifications and responses need no scope; malformed messages get their error
        scope = _method_scope(message)
        if scope:
            needed.add(scope)
        if message["method"] == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if tool_scopes is None:
                tool_scopes = dict(tenant.tool_scopes)
            required = tool_scopes.get(name) if isinstance(name, str) else None
            if required:
                needed.add(required)
                if required not in caller.scopes:
                    tools_needing.append(name)
    missing = needed - caller.scopes
    if not missing:
        return
    listed = " ".join(sorted(missing))
    what = f"Calling tool {tools_needing[0][:64]!r} needs" if tools_needing else "This request needs"
    description = f"{what} the scope(s) {listed}, which the access token lacks."
    # The scopes granted so far are listed too, so re-authorizing does not lose them (2025-11-25).
    wanted = " ".join(sorted(needed | caller.scopes))
    raise HttpError(
        403,
        f"Insufficient scope: {description} Re-authorize with: {wanted}",
        code=None,
        headers=[bearer_challenge(tenant, "insufficient_scope", description, wanted)],
    )
