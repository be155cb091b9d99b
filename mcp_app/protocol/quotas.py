"""Tenant quotas: tool calls per minute for the whole tenant, per tool and per caller, on every process.

Counted in fixed one-minute windows in Redis (`mcp:quota:<tenant>:<scope>:<window>`), but not with a
round trip per call: a process reserves a batch of calls from the window's counter (INCRBY) and
spends it locally. A batch is a tenth of the quota (1 to 100), so a quota of 600 a minute costs one
round trip per 60 calls here, and every scope that needs a new batch goes in the same pipeline. A
reservation never takes more than is left, so a tenant never gets more than its quota in a window;
what a process reserved and did not spend is lost for that window (at most a batch per process).
Without Redis the counts are this process's own, exact (one process). A refused call spends nothing.
If Redis fails, calls go through (logged): a quota must not turn an outage into a refusal of all.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from mcp_app.core.context import RequestContext
from mcp_app.infra import redis_client
from mcp_app.protocol.ratelimit import RateLimited

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
MAX_BATCH = 100
_MAX_ALLOWANCES = 100_000


@dataclass
class _Allowance:
    window: int
    left: int
    exhausted: bool = False  # the window's counter had nothing more to give: refuse without asking


@dataclass(frozen=True)
class _Scope:
    key: str
    limit: int
    label: str


_allowances: dict[str, _Allowance] = {}


def caller_key(ctx: RequestContext) -> str:
    """One caller: its OAuth user, else its OAuth client, else its legacy session, else its address."""
    if ctx.user_id is not None:
        return f"user:{ctx.user_id}"
    if ctx.client_id:
        return f"client:{ctx.client_id}"
    if ctx.session is not None:
        return f"session:{ctx.session.id}"
    return f"address:{ctx.client_address or 'unknown'}"


def _scopes(ctx: RequestContext, tool_name: str) -> list[_Scope]:
    tenant = ctx.tenant
    scopes = []
    if tenant.calls_per_minute:
        scopes.append(_Scope(f"{tenant.id}:all", tenant.calls_per_minute, "this server"))
    if tenant.calls_per_minute_per_tool:
        scopes.append(
            _Scope(f"{tenant.id}:tool:{tool_name}", tenant.calls_per_minute_per_tool, f"the tool {tool_name}")
        )
    if tenant.calls_per_minute_per_caller:
        scopes.append(
            _Scope(f"{tenant.id}:caller:{caller_key(ctx)}", tenant.calls_per_minute_per_caller, "you")
        )
    return scopes


def batch_of(limit: int) -> int:
    return max(1, min(limit // 10, MAX_BATCH))


async def _reserve(scopes: list[_Scope], window: int) -> None:
    """A new batch for each scope: from Redis, or this process's own count of the window."""
    if not redis_client.enabled():
        for scope in scopes:
            if scope.key not in _allowances or _allowances[scope.key].window != window:
                _allowances[scope.key] = _Allowance(window, scope.limit)
            else:
                _allowances[scope.key].exhausted = True
        return
    pipe = redis_client.client().pipeline(transaction=False)
    for scope in scopes:
        key = f"mcp:quota:{scope.key}:{window}"
        pipe.incrby(key, batch_of(scope.limit))
        pipe.expire(key, 2 * WINDOW_SECONDS)
    try:
        replies = await pipe.execute()
    except Exception:  # noqa: BLE001 - fail open: the outage is reported where it matters
        logger.warning("quota counters unreachable; letting the call through", exc_info=True)
        for scope in scopes:
            _allowances[scope.key] = _Allowance(window, 1)
        return
    for scope, total in zip(scopes, replies[::2], strict=True):
        batch = batch_of(scope.limit)
        granted = max(0, min(batch, scope.limit - (int(total) - batch)))
        _allowances[scope.key] = _Allowance(window, granted, exhausted=granted == 0)


async def check(ctx: RequestContext, tool_name: str) -> None:
    """Spend one call of each quota of the tenant, or raise RateLimited (data.retryAfter) spending none."""
    scopes = _scopes(ctx, tool_name)
    if not scopes:
        return
    now = time.time()
    window = int(now // WINDOW_SECONDS)
    if len(_allowances) >= _MAX_ALLOWANCES:
        for key in [k for k, a in _allowances.items() if a.window != window]:
            del _allowances[key]
    refill = []
    for scope in scopes:
        allowance = _allowances.get(scope.key)
        if (
            allowance is None
            or allowance.window != window
            or (allowance.left <= 0 and not allowance.exhausted)
        ):
            refill.append(scope)
    if refill:
        await _reserve(refill, window)
    for scope in scopes:
        if _allowances[scope.key].left <= 0:
            retry_after = round(WINDOW_SECONDS - now % WINDOW_SECONDS, 3)
            raise RateLimited(
                f"Quota reached: at most {scope.limit} tool calls per minute for {scope.label}. "
                f"Retry in {retry_after} s.",
                data={"retryAfter": retry_after, "quota": scope.label, "limit": scope.limit},
            )
    for scope in scopes:
        _allowances[scope.key].left -= 1


def reset() -> None:
    """Forget every allowance (tests)."""
    _allowances.clear()
