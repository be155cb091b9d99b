"""A handler's work that our client may cancel: one way to stop it (AMB-313).

A streamed HTTP reply (http_stream.py) and an upstream call (upstream.py) both run until their
result or our client's cancellation, whichever comes first; the work is then cancelled, which closes
the endpoint's stream or cancels the upstream's call, and the tool's result says it was cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from mcp_app.core.errors import ToolError

T = TypeVar("T")


async def unless_cancelled(cancelled: asyncio.Event | None, work: Awaitable[T], message: str) -> T:
    """``work``'s outcome; when ``cancelled`` is set first, ``work`` is cancelled and ToolError(message) raised."""
    task = asyncio.ensure_future(work)
    if cancelled is None:
        return await task
    stop = asyncio.ensure_future(cancelled.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            # The work must have let go of what it holds (a stream, an upstream call) before the
            # caller goes on. (asyncio.wait, not `await task`: a cancellation of this task while it
            # waits must not be swallowed.)
            await asyncio.wait({task})
    if task.cancelled():
        raise ToolError(message)
    return task.result()
