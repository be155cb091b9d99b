"""Tenant quotas and caps: tool calls per minute (the whole tenant, per tool, per caller), the
tenant's own quotas (AMB-352: calls of a tool or of every tool per minute, hour or day, per caller
or for everyone), background runs at once, on every process; each refusal counted for /metrics.

Counted in fixed windows (a minute for the settings' quotas; a quota's own) in Redis
(`mcp:quota:<tenant>:<scope>:<window>`), but not with a
round trip per call: a process reserves a batch of calls from the window's counter (INCRBY) and
spends it locally. A batch is a tenth of the quota (1 to 100), so a quota of 600 a minute costs one
round trip per 60 calls here, and every scope that needs a new batch goes in the same pipeline. A
reservation never takes more than is left, so a tenant never gets more than its quota in a window;
what a process reserved and did not spend is lost for that window (at most a batch per process).
Without Redis the counts are this process's own, exact (one process). A refused call spends nothing.
If Redis fails, calls go through (logged): a quota must not turn an outage into a refusal of all.
This reservation is why the quotas are not on the `limits` library like the other two limiters:
it costs a round trip per call and scope, measured at 24 to 80 times this per call (AMB-139).

The background-run cap is counted when asked, not kept: a tenant's queued and running runs from its
ToolRun rows, only where a cap is set. Open sessions are admitted by streams/session_admission.py
(per client and per tenant, AMB-100..103), which counts its refusals here too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from mcp_app.background import runs
from mcp_app.core.context import RequestContext
from mcp_app.core.types import QuotaDef
from mcp_app.governance.audit import identity_key
from mcp_app.infra import redis_client
from mcp_app.models import ToolRun
from mcp_app.protocol.ratelimit import RateLimited

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
MAX_BATCH = 100
_MAX_ALLOWANCES = 100_000


@dataclass
class _Allowance:
    window: int
    left: int
    seconds: int = WINDOW_SECONDS
    exhausted: bool = False  # the window's counter had nothing more to give: refuse without asking


@dataclass(frozen=True)
class _Scope:
    key: str
    limit: int
    label: str
    seconds: int = WINDOW_SECONDS
    quota: str | None = None  # a tenant's own quota (AMB-352), by name; None: the settings' quotas


class QuotaReached(Exception):  # noqa: N818 - named for what the caller is told
    """A tenant's own quota is spent: the call answers `isError: true` with this message (AMB-352)."""

    def __init__(self, message: str, retry_after: float, quota: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.quota = quota


_allowances: dict[str, _Allowance] = {}
_refusals: Counter[str] = Counter()
_refusals_lock = threading.Lock()
# How long a refused session or background run is told to wait before trying again.
CAP_RETRY_SECONDS = 30


def count_refusal(kind: str) -> None:
    """Count one refusal past a limit (for /metrics); the transport's own caps count theirs here too."""
    with _refusals_lock:
        _refusals[kind] += 1


def _refuse(kind: str, message: str, retry_after: float, **data: object) -> RateLimited:
    count_refusal(kind)
    return RateLimited(message, data={"retryAfter": retry_after, **data})


def refusals() -> dict[str, int]:
    """Refusals by limit in this process since it started (for /metrics)."""
    with _refusals_lock:
        return dict(_refusals)


def caller_key(ctx: RequestContext) -> str:
    """One caller: its OAuth user (ours, or the tenant's identity provider's), else its OAuth client,
    else its legacy session, else its address."""
    if ctx.user_id is not None:
        return f"user:{ctx.user_id}"
    if ctx.subject:
        return f"subject:{ctx.subject}"
    if ctx.client_id:
        return f"client:{ctx.client_id}"
    if ctx.session is not None:
        return f"session:{ctx.session.id}"
    return f"address:{ctx.client_address or 'unknown'}"


# (tenant, its quotas, tool, caller) -> the scopes of the quotas it defined: each made once, not at
# every call (their keys and labels are strings built from all four; AMB-375). Emptied past its size.
_DEFINED: dict[tuple[Any, ...], tuple[_Scope, ...]] = {}
_DEFINED_ENTRIES = 16_384


def _defined_scopes(ctx: RequestContext, tool_name: str, defined: tuple[QuotaDef, ...]) -> list[_Scope]:
    if not defined:
        return []
    whom = identity_key(ctx)
    key = (ctx.tenant.id, defined, tool_name, whom)
    found = _DEFINED.get(key)
    if found is None:
        found = tuple(_made_scopes(ctx.tenant.id, tool_name, defined, whom))
        if len(_DEFINED) >= _DEFINED_ENTRIES:
            _DEFINED.clear()
        _DEFINED[key] = found
    return list(found)


def _made_scopes(tenant_id: int, tool_name: str, defined: tuple[QuotaDef, ...], caller: str) -> list[_Scope]:
    scopes = []
    for quota in defined:
        if quota.tool and quota.tool != tool_name:
            continue
        whom = caller if quota.per == "caller" else "all"
        what = f"the tool {tool_name}" if quota.tool else "this server's tools"
        label = f"{what} {'for you' if quota.per == 'caller' else 'for everyone together'}"
        scopes.append(
            _Scope(f"{tenant_id}:q:{quota.name}:{whom}", quota.calls, label, quota.seconds, quota.name)
        )
    return scopes


def _scopes(ctx: RequestContext, tool_name: str, defined: tuple[QuotaDef, ...]) -> list[_Scope]:
    tenant = ctx.tenant
    scopes = _defined_scopes(ctx, tool_name, defined)
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


def _window(scope: _Scope, now: float) -> int:
    return int(now // scope.seconds)


def _needs_batch(scope: _Scope, now: float) -> bool:
    allowance = _allowances.get(scope.key)
    if allowance is None or allowance.window != _window(scope, now):
        return True
    return allowance.left <= 0 and not allowance.exhausted


def batch_of(limit: int) -> int:
    return max(1, min(limit // 10, MAX_BATCH))


def _grant(scope: _Scope, window: int, granted: int) -> None:
    """Add a reservation to the scope's allowance (concurrent calls may reserve at once: none is lost)."""
    allowance = _allowances.get(scope.key)
    if allowance is None or allowance.window != window:
        allowance = _allowances[scope.key] = _Allowance(window, 0, scope.seconds)
    allowance.left += granted
    if granted == 0:
        allowance.exhausted = True


async def _reserve(scopes: list[_Scope], now: float) -> None:
    """A new batch for each scope: from Redis, or this process's own count of the window."""
    if not redis_client.enabled():
        for scope in scopes:
            allowance = _allowances.get(scope.key)
            fresh = allowance is None or allowance.window != _window(scope, now)
            _grant(scope, _window(scope, now), scope.limit if fresh else 0)
        return
    pipe = redis_client.client().pipeline(transaction=False)
    for scope in scopes:
        key = f"mcp:quota:{scope.key}:{_window(scope, now)}"
        pipe.incrby(key, batch_of(scope.limit))
        pipe.expire(key, 2 * scope.seconds)
    try:
        replies = await pipe.execute()
    except Exception:  # noqa: BLE001 - fail open: the outage is reported where it matters
        logger.warning("quota counters unreachable; letting the call through", exc_info=True)
        for scope in scopes:
            _grant(scope, _window(scope, now), 1)
        return
    for scope, total in zip(scopes, replies[::2], strict=True):
        batch = batch_of(scope.limit)
        _grant(scope, _window(scope, now), max(0, min(batch, scope.limit - (int(total) - batch))))


async def check(ctx: RequestContext, tool_name: str, defined: tuple[QuotaDef, ...] = ()) -> None:
    """Spend one call of each quota of the tenant, or spend none and raise: QuotaReached for a quota
    the tenant defined (AMB-352), RateLimited (data.retryAfter) for its settings' per-minute quotas."""
    scopes = _scopes(ctx, tool_name, defined)
    if not scopes:
        return
    now = time.time()
    if len(_allowances) >= _MAX_ALLOWANCES:
        for key in [k for k, a in _allowances.items() if a.window != int(now // a.seconds)]:
            del _allowances[key]
    while refill := [scope for scope in scopes if _needs_batch(scope, now)]:
        # Calls running beside this one may spend a batch while it waits for its own: ask again until
        # each scope has a call left or its window has nothing more to give (every round gets one of two).
        await _reserve(refill, now)
    for scope in scopes:
        if _allowances[scope.key].left <= 0:
            retry_after = round(scope.seconds - now % scope.seconds, 3)
            if scope.quota is not None:
                count_refusal("quota")
                raise QuotaReached(
                    f"Quota {scope.quota} reached: at most {scope.limit} calls per {_per_window(scope.seconds)} "
                    f"of {scope.label}. Retry in {retry_after} s.",
                    retry_after,
                    scope.quota,
                )
            raise _refuse(
                "calls_per_minute",
                f"Quota reached: at most {scope.limit} tool calls per minute for {scope.label}. "
                f"Retry in {retry_after} s.",
                retry_after,
                quota=scope.label,
                limit=scope.limit,
            )
    for scope in scopes:
        _allowances[scope.key].left -= 1


def _per_window(seconds: int) -> str:
    return {60: "minute", 3600: "hour", 86400: "day (UTC)"}.get(seconds, f"{seconds} s")


def _busy_runs(tenant_id: int) -> int:
    return ToolRun.objects.filter(tenant_id=tenant_id, status__in=(runs.QUEUED, runs.RUNNING)).count()


async def check_background_runs(ctx: RequestContext) -> None:
    """Before a background run: RateLimited when the tenant already has its cap queued or running."""
    cap = ctx.tenant.max_background_runs
    if not cap:
        return
    if await database_sync_to_async(_busy_runs)(ctx.tenant.id) >= cap:
        raise _refuse(
            "background_runs",
            f"This server already has its limit of {cap} background runs queued or running. "
            f"Retry in {CAP_RETRY_SECONDS} s, or when one ends.",
            CAP_RETRY_SECONDS,
            limit=cap,
        )


def reset() -> None:
    """Forget every allowance and refusal count (tests)."""
    _allowances.clear()
    with _refusals_lock:
        _refusals.clear()
