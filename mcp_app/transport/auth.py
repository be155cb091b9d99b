"""Where the transport asks who is calling; the OAuth resource-server check plugs in here.

Until an authenticator is installed every tenant endpoint is public. An authenticator takes the
request and the tenant and returns a Caller, or raises wire.HttpError(401, ..., headers=[WWW-Authenticate]).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_app.protocol.context import TenantInfo

from .wire import Request


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
