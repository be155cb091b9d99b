"""Token buckets limiting tool calls per session (TL-13: tool invocations MUST be rate-limited).

Buckets live in process memory: with N Daphne processes a session that is balanced across all of
them could reach N times the rate. That is an accepted bound (a shared Redis counter would cost a
round trip per call on the hot path); the limit exists to stop a runaway client, not to meter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings

from mcp_app.core.context import RequestContext
from mcp_app.protocol.jsonrpc import JsonRpcError

RATE_LIMITED = -32000  # implementation-defined server error range (JSON-RPC 2.0 §5.1)
_MAX_BUCKETS = 100_000


class RateLimited(JsonRpcError):
    code, message = RATE_LIMITED, "Rate limit exceeded"


@dataclass
class _Bucket:
    tokens: float
    stamp: float


_buckets: dict[tuple[int, str], _Bucket] = {}


def _key(ctx: RequestContext) -> tuple[int, str]:
    """A session's own bucket; without one (2026-07-28), the user's, else the peer address's."""
    if ctx.session is not None:
        return (ctx.tenant.id, ctx.session.id)
    if ctx.user_id is not None:
        return (ctx.tenant.id, f"user:{ctx.user_id}")
    return (ctx.tenant.id, f"address:{ctx.client_address}" if ctx.client_address else "anonymous")


def check_tool_call(ctx: RequestContext) -> None:
    """Take one token for a tools/call, or raise RateLimited with the wait in data.retryAfter."""
    per_minute = settings.MCP_TOOL_CALLS_PER_MINUTE
    if per_minute <= 0:
        return
    burst = max(1, settings.MCP_TOOL_CALLS_BURST)
    rate = per_minute / 60.0
    now = time.monotonic()
    key = _key(ctx)
    bucket = _buckets.get(key)
    if bucket is None:
        if len(_buckets) >= _MAX_BUCKETS:
            _buckets.clear()  # idle sessions' buckets are full anyway; dropping them loses nothing
        bucket = _buckets[key] = _Bucket(tokens=float(burst), stamp=now)
    else:
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
    if bucket.tokens < 1.0:
        retry_after = round((1.0 - bucket.tokens) / rate, 3)
        raise RateLimited(
            f"Too many tool calls: at most {per_minute} per minute per session (or, without one, per "
            f"user or address). Retry in {retry_after} s.",
            data={"retryAfter": retry_after},
        )
    bucket.tokens -= 1.0


def reset() -> None:
    """Forget every bucket (tests)."""
    _buckets.clear()
