"""Who is calling: every MCP request is authenticated, every POST's scopes checked, no switch to skip it.

The checks are the OAuth resource server's (mcp_app.oauth.resource_server); this module turns their
refusals into the transport's HTTP answers and tells whether a session belongs to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_app.core.context import Caller, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.oauth import resource_server
from mcp_app.protocol.dispatch import METHODS
from mcp_app.streams import session_admission
from mcp_app.transport.wire import HttpError, Request


async def authenticate(request: Request, tenant: TenantInfo) -> Caller:
    """The caller of `request` on `tenant`; HttpError 400/401 when its credentials do not do."""
    try:
        return await resource_server.authenticate(
            request.header("authorization"), request.query, tenant, request.client
        )
    except resource_server.Refusal as refusal:
        raise HttpError(refusal.status, refusal.message, code=None, headers=refusal.headers) from None


def check_scopes(caller: Caller, tenant: TenantInfo, messages: Iterable[Any]) -> None:
    """HttpError 403 insufficient_scope when the caller's token does not cover these messages: the one
    scope check of every transport, each request's scopes read from the method table."""
    if caller.scopes is None:
        return
    needed: set[str] = set()
    tools_needing: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or "id" not in message:
            continue  # notifications and responses need no scope; malformed messages get their error
        method = METHODS.get(name) if isinstance(name := message.get("method"), str) else None
        if method is None:
            continue  # answered -32601 by the dispatcher
        scopes, tool = method.scopes(tenant, message.get("params"))
        needed |= scopes
        if tool is not None and not scopes <= caller.scopes:
            tools_needing.append(tool)
    try:
        resource_server.check_scopes(caller, tenant, needed, tools_needing)
    except resource_server.Refusal as refusal:
        raise HttpError(refusal.status, refusal.message, code=None, headers=refusal.headers) from None


def owns(session: SessionState, caller: Caller) -> bool:
    """A session belongs to the user and the OAuth client that opened it (both None on public tenants).

    A tenant's identity provider's users have no user id: the session's owner key (its subject) tells
    them apart, both ways, so neither such a user nor a public caller takes another's session.
    """
    if session.user_id != caller.user_id or session.client_id != caller.client_id:
        return False
    if caller.subject or session.owner.startswith("subject:"):
        return session.owner == session_admission.client_key(caller, None)
    return True
