"""Helpers for protocol tests: contexts and one-call wrappers around dispatch."""

from __future__ import annotations

import base64
import itertools
from typing import Any

from mcp_app.core.context import RequestContext, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.protocol.dispatch import dispatch

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


def make_ctx(
    tenant: Any,
    version: str = "2025-11-25",
    session: SessionState | None | bool = True,
    **kwargs: Any,
) -> RequestContext:
    """A context for `tenant` at `version`; session=True makes a fresh session, None a stateless request."""
    info = TenantInfo(
        id=tenant.id,
        slug=tenant.slug,
        name=tenant.name,
        title=tenant.title,
        description=tenant.description,
        server_version=tenant.server_version,
        website_url=tenant.website_url,
        icons=tuple(tenant.icons or ()),
        instructions=tenant.instructions,
    )
    if session is True:
        session = SessionState(id="sess-1", tenant_id=tenant.id, protocol_version=version, initialized=True)
    return RequestContext(tenant=info, protocol_version=version, session=session or None, **kwargs)


_ids = itertools.count(1)


async def call(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Send one request through dispatch and return the whole response."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method}
    if params is not None:
        message["params"] = params
    reply = await dispatch(ctx, message)
    assert reply is not None
    assert reply["id"] == message["id"]
    return reply


async def result_of(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await call(ctx, method, params)
    assert "error" not in reply, reply
    return reply["result"]


async def error_of(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await call(ctx, method, params)
    assert "result" not in reply, reply
    return reply["error"]
