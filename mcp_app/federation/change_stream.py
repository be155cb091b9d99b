"""Hear an upstream's list changes: a legacy session's GET stream, or a 2026-07-28 `subscriptions/listen`.

`watch` holds one SDK client of its own (not the pool's: a stream that lives for hours must not be
idled out, bounded or shared with calls) and calls ``on_change(kind)`` for each list change the
upstream announces, for the kinds asked for that the upstream advertises (`listChanged`). It never
returns while the connection is good; it ends with `UpstreamError` / `UpstreamUnavailable` (the one
mapping of failures.py) when the connection is lost, returns when a 2026-07-28 upstream closes the
stream gracefully (it shuts down: listen again), and raises `NothingToWatch` when the upstream
announces none of those kinds. A legacy session has no acknowledgement and the SDK's GET stream gives
up silently after two failed reconnections, so the session is pinged every ``ping_seconds``: a ping
that fails (the upstream restarted and forgot the session, or is gone) ends the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from typing import Any

import mcp_types as types
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_app.federation import breaker, failures
from mcp_app.federation.errors import UpstreamError, UpstreamUnavailable
from mcp_app.federation.pool import sdk_client
from mcp_app.federation.target import Target
from mcp_app.federation.transport import CURRENT_CALL, CallState

KINDS = ("tools", "prompts", "resources")
_NOTIFICATIONS: dict[type, str] = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}
_EVENTS: dict[type, str] = {
    ToolsListChanged: "tools",
    PromptsListChanged: "prompts",
    ResourcesListChanged: "resources",
}


class NothingToWatch(UpstreamError):
    """The upstream announces no change of the lists asked for (no `listChanged`)."""


def advertised(capabilities: Any, kinds: Collection[str] = KINDS) -> list[str]:
    """The kinds among ``kinds`` whose list changes the upstream's capabilities say it announces."""
    found = []
    for kind in kinds:
        capability = getattr(capabilities, kind, None)
        if capability is not None and getattr(capability, "list_changed", None):
            found.append(kind)
    return found


async def watch(
    target: Target,
    on_change: Callable[[str], None],
    *,
    kinds: Collection[str] = KINDS,
    ping_seconds: float = 30.0,
    on_ready: Callable[[list[str]], None] | None = None,
) -> None:
    """Listen to ``target``'s list changes until the connection ends (see the module's docstring).

    ``on_ready(kinds)`` is called once the upstream listens (the 2026-07-28 acknowledgement, or the
    legacy session opened): what changed before that moment was not heard, so a caller refetches then.
    """
    state = CallState()
    token = CURRENT_CALL.set(state)

    async def on_message(message: Any) -> None:
        kind = _NOTIFICATIONS.get(type(message))
        # A 2026-07-28 listen delivers each change as a subscription event too: heard there, once.
        if kind is not None and kind in watched and not listens:
            on_change(kind)

    watched: list[str] = []
    listens = False
    # An HTTP+SSE session's stream ended (transport.py): the watch ends with it.
    lost = asyncio.Event()
    try:
        # The read timeout bounds the opening (discover or initialize), the listen's acknowledgement and
        # each ping; the listen stream itself has none (the SDK waits for its result for as long as it lives).
        async with sdk_client(
            target,
            lost.set,
            lost.set,
            message_handler=on_message,
            read_timeout_seconds=target.timeout_seconds,
        ) as client:
            watched[:] = advertised(client.server_capabilities, kinds)
            if not watched:
                raise NothingToWatch(f"Upstream {target.label} announces no list changes.")
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                listens = True
                flags: dict[str, Any] = {f"{kind}_list_changed": True for kind in watched}
                async with client.listen(**flags) as subscription:
                    if on_ready is not None:
                        on_ready(list(watched))
                    async for event in subscription:
                        if (kind := _EVENTS.get(type(event))) is not None:
                            on_change(kind)
                return
            if on_ready is not None:
                on_ready(list(watched))
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), timeout=ping_seconds)
                if lost.is_set():
                    if state.flooded is not None:
                        raise _flooded(target, state)
                    raise UpstreamUnavailable(f"The connection to upstream {target.label} was lost.")
                await client.send_ping()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure leaves through the one mapping
        if state.flooded is not None:
            raise _flooded(target, state) from None
        if isinstance(failures.leaf(exc), SubscriptionLost):
            raise UpstreamUnavailable(f"The connection to upstream {target.label} was lost.") from None
        raise failures.failure(target, state, exc) from None
    finally:
        CURRENT_CALL.reset(token)


def _flooded(target: Target, state: CallState) -> UpstreamError:
    """A change stream that outran its budget (AMB-195): the watch ends, and calls to the upstream pause
    as after a flooded call (AMB-188); the watch listens again after its backoff."""
    breaker.trip(target)
    burst, per_second = state.flooded or (0.0, 0.0)
    return UpstreamError(
        f"Upstream {target.label} sent more than {burst:g} messages at once (then {per_second:g} a second) "
        "on its change stream; the stream was closed."
    )
