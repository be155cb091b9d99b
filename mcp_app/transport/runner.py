"""The request runner both transports share: one message from the wire to the dispatcher and back.

Streamable HTTP (consumer.py) and the 2024-11-05 HTTP+SSE transport (legacy.py) differ in how
messages arrive and how answers leave; what happens in between is here, once: the RequestContext a
message runs under, notifications and responses handled inline (with `notifications/cancelled`
reaching the request it names, in whichever process runs it), and the session written back when
a message changed it, with its open stream told when a field it filters on changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mcp_app.core import logs
from mcp_app.core.context import Caller, RequestContext, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.governance import guardrails
from mcp_app.infra import notify, tracing
from mcp_app.protocol import asking, discovery
from mcp_app.protocol import dispatch as protocol
from mcp_app.protocol.jsonrpc import MessageKind
from mcp_app.streams import inflight, sessions
from mcp_app.usage import flush as usage_flush
from mcp_app.usage import recorder as usage

logger = logging.getLogger(__name__)
requests_logger = logging.getLogger("mcp_app.requests")


# Methods counted under their own name; anything else a client sends is counted as "(other)".
KNOWN_METHODS = frozenset(protocol.METHODS)


async def run_dispatch(
    ctx: RequestContext, message: dict[str, Any], kind: MessageKind
) -> dict[str, Any] | None:
    """Hand one message to the protocol core (a seam tests may replace); count each request once,
    and every log record made meanwhile carries the request's fields (core/logs.py). With tracing
    on (infra/tracing.py, AMB-85) the message runs in a span named by its method."""
    tool = tool_name(message)
    traced = tracing.active
    if traced is None:
        return await dispatch_counted(ctx, message, kind, tool)
    method = message.get("method")
    params = message.get("params")
    with traced.request_span(
        ctx.tenant.slug,
        method if method in KNOWN_METHODS else usage.OTHER,
        tool,
        message.get("id"),
        ctx.protocol_version,
        meta=params.get("_meta") if isinstance(params, dict) else None,
        session_id=ctx.session.id if ctx.session is not None else None,
    ) as span:
        response = await dispatch_counted(ctx, message, kind, tool)
        traced.note_response(span, response)
        return response


def tool_name(message: dict[str, Any]) -> str | None:
    """The tool a tools/call names (for logs and traces), read once per message."""
    params = message.get("params")
    name = params.get("name") if message.get("method") == "tools/call" and isinstance(params, dict) else None
    return name if isinstance(name, str) else None


async def dispatch_counted(
    ctx: RequestContext, message: dict[str, Any], kind: MessageKind, tool: str | None
) -> dict[str, Any] | None:
    started = time.perf_counter()
    bound = logs.bind(
        tenant=ctx.tenant.slug,
        session=ctx.session.id if ctx.session else None,
        client=ctx.client_id,
        request_id=message.get("id"),
        method=message.get("method"),
        tool=tool,
    )
    is_call = kind == "request"
    seen = guardrails.ArgumentsSeen()
    watching = guardrails.ARGUMENTS_SEEN.set(seen)
    try:
        try:
            response = await protocol.dispatch(ctx, message, kind)
        except asyncio.CancelledError:
            if is_call:  # the client gave up: a call, not an error
                record_usage(ctx, message, None, started, seen)
                log_request(None, started)
            raise
        if response is not None:  # notifications and client responses are not requests
            record_usage(ctx, message, response, started, seen)
            log_request(response, started)
        return response
    finally:
        guardrails.ARGUMENTS_SEEN.reset(watching)
        logs.unbind(bound)


def log_request(response: dict[str, Any] | None, started: float) -> None:
    """One line per answered request on `mcp_app.requests`, at INFO (off unless MCP_LOG_REQUESTS=1)."""
    if not requests_logger.isEnabledFor(logging.INFO):
        return
    if response is None:
        outcome = "cancelled"
    elif "error" in response:
        outcome = "error"
    else:
        result = response.get("result")
        outcome = "tool_error" if isinstance(result, dict) and result.get("isError") is True else "ok"
    duration_ms = round((time.perf_counter() - started) * 1000, 2)
    requests_logger.info("request", extra={"duration_ms": duration_ms, "outcome": outcome})


# What a usage error keeps of arguments in which a guardrail found something.
WITHHELD = "<withheld: a guardrail found what it looks for in them>"


def record_usage(
    ctx: RequestContext,
    message: dict[str, Any],
    response: dict[str, Any] | None,
    started: float,
    seen: guardrails.ArgumentsSeen | None = None,
) -> None:
    """Count one request in this process's memory (mcp_app.usage): no I/O on the request path. Arguments
    in which a guardrail found something are not kept for the dashboard's errors (AMB-354: never the
    text found, and a blocked call's arguments are nothing but that)."""
    method = message.get("method")
    method = method if method in KNOWN_METHODS else usage.OTHER
    params = message.get("params")
    if method == "tools/call" and isinstance(params, dict):
        params = discovery.as_called(ctx, params)  # call_tool's call counts as the tool's own
    if seen is not None and seen.found and isinstance(params, dict) and "arguments" in params:
        params = {**params, "arguments": WITHHELD}
    usage.observe(ctx.tenant.id, method, params, response, time.perf_counter() - started)
    if not usage_flush.started():
        usage_flush.start()


# What a message may change in its session: lifecycle, logging/setLevel, resources/(un)subscribe,
# and the 2024-11-05 transport's initialize. The rest (id, tenant, owner, creation) never changes.
Snapshot = dict[str, Any]


def snapshot(session: SessionState | None) -> Snapshot:
    """Freeze what a message may change in the session, to compare after it ran.

    Copies of the containers (`subscriptions` is appended to in place); no JSON: this runs twice on
    every legacy request, and encoding the session for a comparison cost ~30 function calls each.
    """
    if session is None:
        return {}
    return {
        "protocol_version": session.protocol_version,
        "client_info": dict(session.client_info),
        "client_capabilities": dict(session.client_capabilities),
        "log_level": session.log_level,
        "initialized": session.initialized,
        "subscriptions": list(session.subscriptions),
        "user_id": session.user_id,
        "client_id": session.client_id,
    }


def session_changed(before: Snapshot, session: SessionState | None) -> bool:
    return session is not None and snapshot(session) != before


# What an open stream filters tenant-wide events on; a change to these is announced to the stream.
STREAM_FIELDS = ("initialized", "subscriptions")


async def persist_session(session: SessionState, before: Snapshot) -> None:
    """Write a session a message changed; tell its open stream when a field it filters on changed."""
    if not await sessions.get_store().update(session):
        return
    if all(before.get(name) == getattr(session, name) for name in STREAM_FIELDS):
        return
    try:
        await notify.apublish_session(session.id, {"type": "mcp.session_changed", "session_id": session.id})
    except Exception:  # the change is stored; only an open stream's view of it is late
        logger.warning("could not announce a change of session %.8s", session.id, exc_info=True)


def progress_token(message: dict[str, Any]) -> str | int | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def cancelled_request_id(message: dict[str, Any]) -> str | int | None:
    """The request a `notifications/cancelled` names, when it names one usable as an id."""
    if message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    return request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


def build_context(
    tenant: TenantInfo,
    caller: Caller,
    session: SessionState | None,
    version: str,
    message: dict[str, Any],
    client_capabilities: dict[str, Any] | None = None,
    **extra: Any,
) -> RequestContext:
    """The context one message runs under: the tenant, the negotiated version, the caller's identity."""
    if client_capabilities is None:
        client_capabilities = session.client_capabilities if session else {}
    return RequestContext(
        tenant=tenant,
        protocol_version=version,
        session=session,
        client_capabilities=client_capabilities,
        user_id=caller.user_id,
        client_id=caller.client_id,
        scopes=caller.scopes,
        subject=caller.subject,
        claims=caller.claims,
        role=caller.role,
        request_id=message.get("id"),
        progress_token=progress_token(message),
        **extra,
    )


async def accept_message(
    ctx: RequestContext, message: dict[str, Any], kind: MessageKind, session: SessionState | None
) -> None:
    """Handle a notification or a response inline (both are answered 202 by the transport)."""
    request_id = cancelled_request_id(message)
    if request_id is not None and session is not None:
        await inflight.cancel(session.id, request_id, (message.get("params") or {}).get("reason"))
    if session is not None and "method" not in message and ("result" in message or "error" in message):
        await asking.deliver(session.id, message)  # the client's answer to a question a handler asked
    before = snapshot(session)
    await run_dispatch(ctx, message, kind)
    if session is not None and session_changed(before, session):
        await persist_session(session, before)
