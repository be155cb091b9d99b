"""logging/setLevel (LG-01, LG-02, AMB-22)."""

from __future__ import annotations

from typing import Any

from mcp_app.core.context import RequestContext
from mcp_app.core.notifications import LOG_LEVELS
from mcp_app.protocol.jsonrpc import InvalidParams


async def handle_set_level(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Set the session's minimum log level; without a session it is accepted and has no lasting effect."""
    level = params.get("level")
    if not isinstance(level, str) or level not in LOG_LEVELS:
        raise InvalidParams(f"Invalid log level; use one of: {', '.join(LOG_LEVELS)}.")
    if ctx.session is not None:
        ctx.session.log_level = level
    return {}
