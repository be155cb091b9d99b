"""Where a template renders (AMB-98): inline when it is small and stays small, else in a render process.

An inline render gets a budget of a few milliseconds, 64 000 characters, values of 4 096 characters or
items and no slow filter; past any of them it stops (``sandbox.Exceeded``), its source is remembered,
and it runs again in a render process (``render_pool``) with the full budget. A remembered source,
or one with many tags, goes to a render process directly. So the event loop spends at most one
inline slice on a hostile template, and a render that runs long is killed with its process.
A source is remembered for the tenant whose render went past the budget: the same text in another
tenant's tool (`{{ message }}` is in many) stays inline, whatever values a hostile client sent the first.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from asgiref.sync import async_to_sync

from mcp_app.content import render_pool, sandbox
from mcp_app.core.context import RequestContext

INLINE_SECONDS = 0.005
INLINE_CHARS = 64_000
INLINE_VALUE = 4_096
# More tags and variables than this cost milliseconds to compile: compiled and rendered elsewhere.
INLINE_TOKENS = 40
REMEMBERED = 4_096

_heavy: collections.OrderedDict[tuple[int, str], None] = collections.OrderedDict()
_heavy_lock = threading.Lock()


def _remember(tenant_id: int, source: str) -> None:
    with _heavy_lock:
        _heavy[(tenant_id, source)] = None
        _heavy.move_to_end((tenant_id, source))
        while len(_heavy) > REMEMBERED:
            _heavy.popitem(last=False)


def forget() -> None:
    """Forget which sources went to a render process (tests start each from the inline path)."""
    with _heavy_lock:
        _heavy.clear()


def _inline_ok(tenant_id: int, source: str) -> bool:
    return sandbox.count_tokens(source) <= INLINE_TOKENS and (tenant_id, source) not in _heavy


def _inline_budget() -> sandbox.Budget:
    return sandbox.Budget(
        deadline=time.thread_time() + INLINE_SECONDS,
        clock=time.thread_time,
        max_chars=INLINE_CHARS,
        max_value=INLINE_VALUE,
        final=False,
        allow_slow=False,
    )


async def _isolated(ctx: RequestContext, kind: str, payload: Any, variables: dict[str, Any]) -> Any:
    seconds = sandbox.template_seconds()
    return await render_pool.pool().run(str(ctx.tenant.id), (kind, payload, variables, seconds), seconds)


async def text(ctx: RequestContext, source: str, variables: dict[str, Any]) -> str:
    """Render a template string with ``variables``; ContentError on any template fault or limit."""
    if "{" not in source:
        return source
    if _inline_ok(ctx.tenant.id, source):
        sandbox.compile_template(source)  # compiled (and cached) before the inline clock starts
        try:
            return sandbox.render_text(source, variables, _inline_budget())
        except sandbox.Exceeded:
            _remember(ctx.tenant.id, source)
    return await _isolated(ctx, "text", source, dict(variables))


async def value(ctx: RequestContext, value: Any, variables: dict[str, Any]) -> Any:
    """Render the templates inside a JSON value (``sandbox.render_value``), inline or isolated."""
    sources = sandbox.sources_in(value)
    if all(_inline_ok(ctx.tenant.id, source) for source in sources):
        for source in sources:
            sandbox.compile_template(source)
        budget = _inline_budget()
        try:
            return sandbox.render_value(value, variables, budget)
        except sandbox.Exceeded:
            _remember(ctx.tenant.id, budget.source)
    return await _isolated(ctx, "value", value, dict(variables))


async def _check_isolated(source: str) -> None:
    seconds = sandbox.template_seconds()
    await render_pool.pool().run("validation", ("check", source, {}, seconds), seconds)


def validate(source: Any, where: str = "template") -> None:
    """Raise ContentError unless ``source`` compiles; a large one compiles in a render process (AMB-99).

    Called by the models' validation (admin, API, imports) in Django's sync threads, which every sync
    view and database call of the process shares: a 100 000-character template compiles for more
    than a second.
    """
    if not isinstance(source, str):
        sandbox.validate_template(source, where)
        return
    if sandbox.count_tokens(source) <= INLINE_TOKENS or len(source) > sandbox.MAX_TEMPLATE_CHARS:
        sandbox.validate_template(source, where)
        return
    try:
        async_to_sync(_check_isolated)(source)
    except RuntimeError as exc:
        if "event loop" not in str(exc):
            raise
        sandbox.validate_template(source, where)  # called on a loop's own thread: nowhere to wait
