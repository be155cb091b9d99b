"""The method table and the one error funnel: one parsed JSON-RPC message in, its response out.

Requests get exactly one response with the same id (BP-04, BP-06); notifications and client
responses get none, not even an error (BP-08). Protocol faults raise a JsonRpcError; anything
else is logged and answered with a bare -32603, so internals never reach the wire.

The table says which era serves each method: the legacy one (initialize, sessions) or the modern
one (2026-07-28: server/discover, no handshake, ping, setLevel or resource subscriptions), and which
scope a request for it needs. The same handlers serve both eras; a modern result also gets `resultType`, the server's identity in
`_meta` and, where cacheable, the caching hints.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_app.core import scopes
from mcp_app.core.context import RequestContext
from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import META_SERVER_INFO, is_modern
from mcp_app.protocol import caching, completion, lifecycle, log_level, prompts, resources, tasks, tools
from mcp_app.protocol.jsonrpc import (
    InternalError,
    InvalidRequest,
    JsonRpcError,
    MessageKind,
    MethodNotFound,
    classify,
    error_response,
    is_initialize,
    response,
    truncate,
    usable_id,
)

__all__ = [
    "LEGACY_METHODS",
    "METHODS",
    "MODERN_METHODS",
    "NOTIFICATIONS",
    "Method",
    "classify",
    "dispatch",
    "is_initialize",
    "entry_for",
]

logger = logging.getLogger(__name__)

Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[RequestContext, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Method:
    """One request method: its handler (which checks its own params and answers -32602), the eras that
    serve it, and the OAuth scope a request for it needs. Every rule about a method is read from here:
    the dispatcher, the 2026-07-28 envelope (404 for a method that era lacks) and the scope check of
    every transport (transport/auth)."""

    handler: Handler
    legacy: bool = True  # served in a session (2024-11-05 ... 2025-11-25)
    # Served statelessly (2026-07-28); else `removed` says what a 2026-07-28 client does instead.
    modern: bool = True
    removed: str = ""
    scope: str | None = None  # None: a valid token is enough
    scope_of_ref: bool = False  # completion/complete: the scope of the family its `ref` names
    tool_scope: bool = False  # tools/call: the called tool's own required scope too (Tool.required_scope)

    def scopes(self, tenant: TenantInfo, params: Any) -> tuple[set[str], str | None]:
        """The scopes a request with these params needs, and the tool whose own scope is among them."""
        needed = {self.scope} if self.scope else set()
        if self.scope_of_ref:
            ref = params.get("ref") if isinstance(params, dict) else None
            kind = ref.get("type") if isinstance(ref, dict) else None
            # Completions reveal a prompt's or a template's values: they need that family's scope.
            families: dict[Any, str] = {"ref/prompt": scopes.PROMPTS, "ref/resource": scopes.RESOURCES}
            family = families.get(kind)
            if family:
                needed.add(family)
        if self.tool_scope:
            name = params.get("name") if isinstance(params, dict) else None
            required = dict(tenant.tool_scopes).get(name) if isinstance(name, str) else None
            if required:
                needed.add(required)
                return needed, name
        return needed, None


METHODS: dict[str, Method] = {
    "initialize": Method(
        lifecycle.handle_initialize,
        modern=False,
        removed="2026-07-28 has no handshake: send each request with its _meta envelope "
        "(or initialize without one, for a legacy session)",
    ),
    "ping": Method(lifecycle.handle_ping, modern=False, removed="2026-07-28 removed ping"),
    "server/discover": Method(lifecycle.handle_discover, legacy=False),
    "tools/list": Method(tools.handle_list, scope=scopes.TOOLS),
    "tools/call": Method(tools.handle_call, scope=scopes.TOOLS, tool_scope=True),
    "prompts/list": Method(prompts.handle_list, scope=scopes.PROMPTS),
    "prompts/get": Method(prompts.handle_get, scope=scopes.PROMPTS),
    "resources/list": Method(resources.handle_list, scope=scopes.RESOURCES),
    "resources/templates/list": Method(resources.handle_templates_list, scope=scopes.RESOURCES),
    "resources/read": Method(resources.handle_read, scope=scopes.RESOURCES),
    # 2026-07-28 has no handshake, ping, logging/setLevel or resources/(un)subscribe: subscriptions/listen
    # is a stream, served by the transport.
    "resources/subscribe": Method(
        resources.handle_subscribe,
        scope=scopes.RESOURCES,
        modern=False,
        removed="open subscriptions/listen with notifications.resourceSubscriptions instead",
    ),
    "resources/unsubscribe": Method(
        resources.handle_unsubscribe,
        scope=scopes.RESOURCES,
        modern=False,
        removed="close the subscriptions/listen stream instead",
    ),
    "completion/complete": Method(completion.handle_complete, scope_of_ref=True),
    "logging/setLevel": Method(
        log_level.handle_set_level,
        modern=False,
        removed="set io.modelcontextprotocol/logLevel in the _meta of each request instead",
    ),
    # 2025-11-25 tasks (protocol/tasks.py); a session at another revision finds none of its tasks.
    # The 2026-07-28 tasks extension polls tasks/get (no tasks/result or tasks/list) and answers input
    # with tasks/update.
    "tasks/get": Method(tasks.handle_get),
    "tasks/result": Method(tasks.handle_result, modern=False),
    "tasks/list": Method(tasks.handle_list, modern=False),
    "tasks/cancel": Method(tasks.handle_cancel),
    "tasks/update": Method(tasks.handle_update, legacy=False),
}
LEGACY_METHODS = frozenset(name for name, method in METHODS.items() if method.legacy)
MODERN_METHODS = frozenset(name for name, method in METHODS.items() if method.modern)


def entry_for(method: Any, modern: bool) -> Method | None:
    """The method's entry when the era serves it."""
    entry = METHODS.get(method) if isinstance(method, str) else None
    return entry if entry is not None and (entry.modern if modern else entry.legacy) else None


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


async def dispatch(
    ctx: RequestContext, message: dict[str, Any], kind: MessageKind | None = None
) -> dict[str, Any] | None:
    """Handle one message; return the response for a request, None for a notification or a response.

    `kind`: what the transport classified the message as, on its way in (each message is classified
    once); a caller that has not classified it (the admin, a page) leaves it to this function.
    """
    if kind is None:
        try:
            kind = classify(message)
        except InvalidRequest as exc:
            return error_response(usable_id(message), exc)
    method: str = message.get("method") or ""  # a str: classify() checked the request or notification
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
        entry = entry_for(method, modern)
        if entry is None:
            raise MethodNotFound(truncate(f"Method not found: {method}", 200))
        result = await entry.handler(ctx, params)
        if modern:
            result = finish_modern(ctx, method, result)
    except JsonRpcError as exc:
        exc.message = truncate(exc.message)
        return error_response(request_id, exc)
    except Exception:
        logger.exception("%s failed", method)
        return error_response(request_id, InternalError())
    return response(request_id, result)
