"""Notifications a handler sends while it works: log messages and progress.

Here, below every layer, so a handler kind (the http kind relays an endpoint's events) sends them the
same way a python callable or the protocol core does.
"""

from __future__ import annotations

from typing import Any

from mcp_app.core.context import RequestContext
from mcp_app.core.versions import is_modern

# RFC 5424 severities, least to most severe (the names MCP uses).
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_RANK = {name: i for i, name in enumerate(LOG_LEVELS)}
# Before logging/setLevel the session gets messages at this level and above.
DEFAULT_LOG_LEVEL = "info"


def log_threshold(ctx: RequestContext) -> str | None:
    """The least severe level the client gets; None: no log messages at all.

    A modern request opts in with `io.modelcontextprotocol/logLevel` in its `_meta`, and without it
    gets none (2026-07-28 logging); a legacy session gets DEFAULT_LOG_LEVEL until logging/setLevel.
    """
    if is_modern(ctx.protocol_version):
        return ctx.log_level
    return (ctx.session.log_level if ctx.session else None) or ctx.log_level or DEFAULT_LOG_LEVEL


def log_enabled(ctx: RequestContext, level: str) -> bool:
    threshold = log_threshold(ctx)
    return threshold is not None and _RANK[level] >= _RANK[threshold]


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def log(ctx: RequestContext, level: str, data: Any, logger: str | None = None) -> None:
    """Send notifications/message when the session's level admits it."""
    if level not in _RANK:
        raise ValueError(f"unknown log level {level!r}")
    if not log_enabled(ctx, level):
        return
    params: dict[str, Any] = {"level": level, "data": data}
    if logger:
        params["logger"] = logger
    await ctx.emit(_notification("notifications/message", params))


async def progress(
    ctx: RequestContext, value: float, total: float | None = None, message: str | None = None
) -> None:
    """Send notifications/progress when the request carried a progressToken; otherwise nothing."""
    if ctx.progress_token is None:
        return
    params: dict[str, Any] = {"progressToken": ctx.progress_token, "progress": value}
    if total is not None:
        params["total"] = total
    if message is not None and ctx.protocol_version >= "2025-03-26":
        params["message"] = message
    await ctx.emit(_notification("notifications/progress", params))
