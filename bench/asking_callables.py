"""Python callables for the bench's background and asking phase (bench/asking.py), never the platform's.

The bench's servers and workers load this module through MCP_PYTHON_HANDLER_MODULES (as
`bench.asking_callables`: the processes run from the repository root), next to the demo's callables.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_app.core import notifications
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.handlers.python import register

GREETING = "Hello, Ada!"


def _int(arguments: dict[str, Any], name: str, low: int, high: int) -> int:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolError(f"'{name}' must be an integer from {low} to {high}.")
    return value


@register("bench_progress")
async def bench_progress(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Report `steps` progress notifications, one every `interval_ms`; each message is the wall-clock
    time (time.time()) of the progress call, so a client on the same machine can time its delivery."""
    steps = _int(arguments, "steps", 1, 1000)
    interval = _int(arguments, "interval_ms", 0, 10_000) / 1000
    for i in range(1, steps + 1):
        await asyncio.sleep(interval)
        await notifications.progress(ctx, i, steps, f"{time.time():.6f}")
    return {"content": [{"type": "text", "text": f"{steps} steps"}]}


@register("bench_greet")
async def bench_greet(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the demo's ask_name answers when the person says "Ada", without asking: the same call's
    cost with the question taken out."""
    return {"content": [{"type": "text", "text": GREETING}]}


@register("bench_sleep")
async def bench_sleep(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Hold the worker for `ms` milliseconds without using its CPU, as a tool waiting on an API does."""
    await asyncio.sleep(_int(arguments, "ms", 0, 10_000) / 1000)
    return {"content": [{"type": "text", "text": "slept"}]}
