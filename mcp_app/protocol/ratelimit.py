"""Tool calls per session (TL-13: tool invocations MUST be rate-limited), in moving windows of the
`limits` library (AMB-139): at most MCP_TOOL_CALLS_PER_MINUTE in any 60 seconds, and at most
MCP_TOOL_CALLS_BURST in any one second.

Counted in process memory: with N Daphne processes a session that is balanced across all of them
could reach N times the rate. That is an accepted bound (a shared Redis counter would cost a round
trip per call on the hot path); the limit exists to stop a runaway client, not to meter.
"""

from __future__ import annotations

import time

from django.conf import settings
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.strategies import MovingWindowRateLimiter

from lib.limits_memory import ThreadlessMemoryStorage
from mcp_app.core.context import RequestContext
from mcp_app.protocol.jsonrpc import JsonRpcError

RATE_LIMITED = -32000  # implementation-defined server error range (JSON-RPC 2.0 §5.1)


class RateLimited(JsonRpcError):
    code, message = RATE_LIMITED, "Rate limit exceeded"


_limiter = MovingWindowRateLimiter(ThreadlessMemoryStorage())


def _key(ctx: RequestContext) -> tuple[str, str]:
    """A session's own windows; without one (2026-07-28), the user's, else the peer address's."""
    tenant = str(ctx.tenant.id)
    if ctx.session is not None:
        return (tenant, f"session:{ctx.session.id}")
    if ctx.user_id is not None:
        return (tenant, f"user:{ctx.user_id}")
    if ctx.subject:
        return (tenant, f"subject:{ctx.subject}")
    return (tenant, f"address:{ctx.client_address}" if ctx.client_address else "anonymous")


def check_tool_call(ctx: RequestContext) -> None:
    """Count one tools/call, or raise RateLimited with the wait in data.retryAfter (counting nothing)."""
    per_minute = settings.MCP_TOOL_CALLS_PER_MINUTE
    if per_minute <= 0:
        return
    items = (
        RateLimitItemPerSecond(max(1, settings.MCP_TOOL_CALLS_BURST)),
        RateLimitItemPerMinute(per_minute),
    )
    key = _key(ctx)
    # Test every window before counting in any: a call refused by one spends nothing of the other.
    full = [item for item in items if not _limiter.test(item, *key)]
    if full:
        now = time.time()
        retry_after = max(
            0.001, round(max(_limiter.get_window_stats(i, *key).reset_time for i in full) - now, 3)
        )
        raise RateLimited(
            f"Too many tool calls: at most {per_minute} per minute per session (or, without one, per "
            f"user or address). Retry in {retry_after} s.",
            data={"retryAfter": retry_after},
        )
    for item in items:
        _limiter.hit(item, *key)


def reset() -> None:
    """Forget every count (tests)."""
    _limiter.storage.reset()
