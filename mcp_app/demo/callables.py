"""The python callables the demo tenant uses (registered on import)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from mcp_app.core import notifications
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.handlers.python import register

COUNT_MAX = 50
DELAY_MAX = 5.0


@register("echo")
async def echo(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the message as text and as structuredContent {"echo": message}."""
    message = arguments.get("message")
    if not isinstance(message, str):
        raise ToolError("'message' must be a string.")
    return {"content": [{"type": "text", "text": message}], "structuredContent": {"echo": message}}


@register("add")
async def add(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return a + b as text and as structuredContent {"sum": a + b}."""
    a, b = arguments.get("a"), arguments.get("b")
    if not isinstance(a, int) or not isinstance(b, int) or isinstance(a, bool) or isinstance(b, bool):
        raise ToolError("'a' and 'b' must be integers.")
    total = a + b
    return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}


def _number(arguments: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ToolError(f"'{name}' must be a number from {low:g} to {high:g}.")
    return value


@register("count_slowly")
async def count_slowly(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Count to n, sleeping delay seconds per step, with progress and log messages; stop when cancelled."""
    n = int(_number(arguments, "n", 3, 1, COUNT_MAX))
    delay = _number(arguments, "delay", 0.05, 0, DELAY_MAX)
    cancelled: asyncio.Event | None = ctx.cancelled
    done = 0
    for i in range(1, n + 1):
        if cancelled is not None:
            # Sleep on the event itself so a cancellation wakes us at once. asyncio.wait, not a timeout
            # whose TimeoutError is suppressed: on Python 3.11 that pair can swallow a cancellation of
            # this task that lands as the timeout fires, and the count would run on.
            woken = asyncio.ensure_future(cancelled.wait())
            try:
                await asyncio.wait({woken}, timeout=delay)
            finally:
                woken.cancel()
            if cancelled.is_set():
                await notifications.log(ctx, "info", f"cancelled after {done} of {n}", logger="count_slowly")
                return {
                    "content": [{"type": "text", "text": f"Cancelled after {done} of {n}."}],
                    "isError": True,
                }
        else:
            await asyncio.sleep(delay)
        done = i
        await notifications.progress(ctx, i, n, f"Counted {i} of {n}")
        await notifications.log(ctx, "info", f"count {i} of {n}", logger="count_slowly")
    return {"content": [{"type": "text", "text": f"Counted to {n}."}], "structuredContent": {"count": n}}


@register("user_profile")
async def user_profile(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return a made-up profile for a user id (a resource template reader)."""
    user_id = str(arguments.get("user_id", ""))
    return {"user_id": user_id, "name": f"User {user_id}"}


@register("ask_name")
async def ask_name(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask the person for their name (elicitation, either era), then greet them by it."""
    form = {
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Your name"}},
        "required": ["name"],
    }
    answer = await ctx.elicit(str(arguments.get("question") or "What is your name?"), form)
    if answer.get("action") != "accept" or not isinstance(answer.get("content"), dict):
        return {
            "content": [{"type": "text", "text": f"No name given ({answer.get('action', 'no answer')})."}]
        }
    return {"content": [{"type": "text", "text": f"Hello, {answer['content'].get('name')}!"}]}


@register("show_roots")
async def show_roots(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """List the client's roots (roots/list, either era): the folders or places it shares."""
    answer = await ctx.list_roots()
    roots = [r for r in answer.get("roots") or [] if isinstance(r, dict) and isinstance(r.get("uri"), str)]
    if not roots:
        return {"content": [{"type": "text", "text": "The client shares no roots."}]}
    lines = [f"- {r['uri']}" + (f" ({r['name']})" if isinstance(r.get("name"), str) else "") for r in roots]
    text = f"The client shares {len(roots)} root(s):\n" + "\n".join(lines)
    return {"content": [{"type": "text", "text": text}]}


@register("roll_dice")
async def roll_dice(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Roll `dice` dice of `sides` sides: the rolls in words (any client) and as structuredContent (the app)."""
    dice = int(_number(arguments, "dice", 2, 1, 10))
    sides = int(_number(arguments, "sides", 6, 2, 100))
    rolls = [secrets.randbelow(sides) + 1 for _ in range(dice)]
    words = f"Rolled {dice} {sides}-sided dice: {', '.join(map(str, rolls))} (total {sum(rolls)})."
    return {
        "content": [{"type": "text", "text": words}],
        "structuredContent": {"rolls": rolls, "total": sum(rolls), "sides": sides},
    }
