"""Notifications a handler sends while it works: log messages and progress.

Here, below every layer, so a handler kind (the http kind relays an endpoint's events) sends them the
same way a python callable or the protocol core does.
"""

from __future__ import annotations

from typing import Any

from mcp_app.core.bucket import TokenBucket
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


# Another server's messages relayed for one call (an upstream tool), each kind through a token bucket:
# a burst, then so many a second. Progress past it is held (the latest wins) and the last held is sent
# when the call ends; log messages past it are counted and the count said once at the end. The spec asks
# both sides to rate-limit progress and log messages; without it one tenant's upstream sending as fast
# as it can kept the event loop every tenant shares busy relaying.
PROGRESS_BURST, PROGRESS_PER_SECOND = 20.0, 10.0
LOG_BURST, LOGS_PER_SECOND = 50.0, 20.0


class Relay:
    """Relays another server's progress and log messages to one call's client, within the bounds above."""

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self.progress_allowance = TokenBucket(PROGRESS_BURST, PROGRESS_PER_SECOND)
        self.log_allowance = TokenBucket(LOG_BURST, LOGS_PER_SECOND)
        self.pending: tuple[float, float | None, str | None] | None = None
        self.dropped = 0

    async def progress(self, value: float, total: float | None = None, message: str | None = None) -> None:
        if self.ctx.progress_token is None:
            return  # nobody asked for progress: it costs no allowance
        if not self.progress_allowance.take():
            self.pending = (value, total, message)
            return
        self.pending = None
        await progress(self.ctx, value, total, message)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        if not log_enabled(self.ctx, level):
            return  # not the client's to see: it costs no allowance
        if not self.log_allowance.take():
            self.dropped += 1
            return
        await log(self.ctx, level, data, logger)

    async def finish(self) -> None:
        """Send the progress held back, and say how many log messages were left out."""
        if self.pending is not None:
            value, total, message = self.pending
            self.pending = None
            await progress(self.ctx, value, total, message)
        if self.dropped and log_enabled(self.ctx, "warning"):
            dropped, self.dropped = self.dropped, 0
            text = f"{dropped} log message(s) of this call were left out: more than {LOGS_PER_SECOND:g} a second."
            await log(self.ctx, "warning", text, "relay")
