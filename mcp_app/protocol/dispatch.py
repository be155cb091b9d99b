"""The method tables and the one error funnel: one parsed JSON-RPC message in, its response out.

Requests get exactly one response with the same id (BP-04, BP-06); notifications and client
responses get none, not even an error (BP-08). Protocol faults raise a JsonRpcError; anything
else is logged and answered with a bare -32603, so internals never reach the wire.

The era of the request's revision picks the table: the legacy one (initialize, sessions) or the
modern one (2026-07-28: server/discover, no handshake, ping, setLevel or resource subscriptions).
The same handlers serve both; a modern result also gets `resultType`, the server's identity in
`_meta` and, where cacheable, the caching hints.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app.core.context import RequestContext
from mcp_app.core.versions import META_SERVER_INFO, is_modern
from mcp_app.protocol import caching, completion, lifecycle, log_level, prompts, resources, tasks, tools
from mcp_app.protocol.jsonrpc import (
    InternalError,
    InvalidRequest,
    JsonRpcError,
    MethodNotFound,
    classify,
    error_response,
    is_initialize,
    response,
    truncate,
    usable_id,
)

__all__ = ["METHODS", "MODERN_METHODS", "NOTIFICATIONS", "classify", "dispatch", "is_initialize"]

logger = logging.getLogger(__name__)

Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[RequestContext, dict[str, Any]], Awaitable[None]]

METHODS: dict[str, Handler] = {
    "initialize": lifecycle.handle_initialize,
    "ping": lifecycle.handle_ping,
    "tools/list": tools.handle_list,
    "tools/call": tools.handle_call,
    "prompts/list": prompts.handle_list,
    "prompts/get": prompts.handle_get,
    "resources/list": resources.handle_list,
    "resources/templates/list": resources.handle_templates_list,
    "resources/read": resources.handle_read,
    "resources/subscribe": resources.handle_subscribe,
    "resources/unsubscribe": resources.handle_unsubscribe,
    "completion/complete": completion.handle_complete,
    "logging/setLevel": log_level.handle_set_level,
    # 2025-11-25 tasks (protocol/tasks.py); a session at another revision finds none of its tasks.
    "tasks/get": tasks.handle_get,
    "tasks/result": tasks.handle_result,
    "tasks/list": tasks.handle_list,
    "tasks/cancel": tasks.handle_cancel,
}


# 2026-07-28: the same primitives; no handshake, ping, logging/setLevel or resources/(un)subscribe
# (subscriptions/listen is a stream, served by the transport).
MODERN_METHODS: dict[str, Handler] = {
    "server/discover": lifecycle.handle_discover,
    **{
        name: METHODS[name]
        for name in (
            "tools/list",
            "tools/call",
            "prompts/list",
            "prompts/get",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "completion/complete",
            "tasks/get",
            "tasks/cancel",
        )
    },
    # The tasks extension polls tasks/get (no tasks/result or tasks/list) and answers input with tasks/update.
    "tasks/update": tasks.handle_update,
}


def finish_modern(ctx: RequestContext, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """Add what every 2026-07-28 result carries: resultType, serverInfo, and caching hints.

    An InputRequiredResult (protocol.asking) keeps its resultType and is never cacheable.
    """
    result.setdefault("resultType", "complete")
    meta = result.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta[META_SERVER_INFO] = lifecycle.server_info(ctx, ctx.protocol_version)
    result["_meta"] = meta
    if method in caching.CACHEABLE_METHODS and result["resultType"] == "complete":
        result.update(caching.hints(ctx))
    return result


async def _ignore(ctx: RequestContext, params: dict[str, Any]) -> None:
    return None


# notifications/cancelled is acted on by the in-flight registry (streams/inflight.py), which owns the running
# request; progress and roots/list_changed concern server-issued requests this core never sends.
# Unknown notifications are ignored (MI-02).
NOTIFICATIONS: dict[str, NotificationHandler] = {
    "notifications/initialized": lifecycle.handle_initialized,
    "notifications/cancelled": _ignore,
    "notifications/progress": _ignore,
    "notifications/roots/list_changed": _ignore,
}


async def dispatch(ctx: RequestContext, message: dict[str, Any]) -> dict[str, Any] | None:
    """Handle one message; return the response for a request, None for a notification or a response."""
    try:
        kind = classify(message)
    except InvalidRequest as exc:
        return error_response(usable_id(message), exc)
    method = message.get("method")
    params = message.get("params") or {}
    if kind == "response":
        return None  # answers to server-issued requests are correlated by the transport
    if kind == "notification":
        handler = NOTIFICATIONS.get(method)
        if handler is not None:
            try:
                await handler(ctx, params)
            except Exception:
                logger.exception("notification %s failed", method)
        return None

    request_id = message["id"]
    modern = is_modern(ctx.protocol_version)
    try:
        handler = (MODERN_METHODS if modern else METHODS).get(method)
        if handler is None:
            raise MethodNotFound(truncate(f"Method not found: {method}", 200))
        result = await handler(ctx, params)
        if modern:
            result = finish_modern(ctx, method, result)
    except JsonRpcError as exc:
        exc.message = truncate(exc.message)
        return error_response(request_id, exc)
    except Exception:
        logger.exception("%s failed", method)
        return error_response(request_id, InternalError())
    return response(request_id, result)
