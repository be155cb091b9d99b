"""Serving one 2026-07-28 request: stateless, answered on its own POST, cancelled by a disconnect.

No session is read or written. The request runs in a task while the consumer watches three things:
the task finishing (a JSON answer), the request emitting a notification (progress, a log message at
the level its `_meta` asked for: the answer becomes an SSE stream scoped to this request, the final
response ends it), and the client closing the connection, which cancels the request, an inline
handler and a background run on a Celery worker alike (2026-07-28 basic/patterns/cancellation).
Nothing is stored for resumption: the revision has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from mcp_app import catalog
from mcp_app.core import ui_apps
from mcp_app.core.context import Caller, ParamHeaders, RequestContext
from mcp_app.core.types import TenantInfo
from mcp_app.governance import decision
from mcp_app.protocol import discovery
from mcp_app.protocol.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_app.streams import stream_slots
from mcp_app.transport import auth, pump, runner, sse
from mcp_app.transport.envelope import Envelope
from mcp_app.transport.wire import Request

if TYPE_CHECKING:
    from mcp_app.transport.base import McpConsumer

# The HTTP status of a JSON answer carrying one of these errors (the SDK's table: intermediaries
# see a client fault as a 4xx); any other error, or a result, is a 200.
ERROR_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def context(
    tenant: TenantInfo,
    caller: Caller,
    envelope: Envelope,
    message: dict[str, Any],
    address: str | None,
    request: Request,
) -> RequestContext:
    """The context of a modern request: everything from its own envelope, no session."""
    return runner.build_context(
        tenant,
        caller,
        None,
        envelope.version,
        message,
        client_capabilities=envelope.capabilities,
        log_level=envelope.log_level,
        client_address=address,
        param_headers=ParamHeaders(request.headers, request.repeated),
        discovery=discovery.choice_of(request.query),
    )


# Methods whose handlers never emit (no progress, no log message) and whose results depend only on
# the tenant's definitions, the page asked for, the caller's scopes and whether the client declared
# MCP Apps (tools/list, AMB-273): answered inline, and the result's JSON kept per change token, so a
# warm list or discover is a dictionary lookup.
QUIET_METHODS = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
MAX_KEPT_ANSWERS = 10_000
_answers: dict[tuple[Any, ...], bytes] = {}


async def answer_quietly(consumer: McpConsumer, ctx: RequestContext, message: dict[str, Any]) -> None:
    """Answer a QUIET_METHODS request in JSON, its result served from memory while definitions stand."""
    started = time.perf_counter()
    cursor = message["params"].get("cursor")
    token = await catalog.current_version(ctx.tenant.id)
    apps = ui_apps.client_supports(ctx.client_capabilities)
    # Under policies a list is the caller's own (AMB-347): kept per what the decision reads of it.
    governed = bool((await catalog.get_catalog(ctx.tenant.id)).policies)
    who = decision.caller_key(ctx) if governed else None
    key = (
        ctx.tenant.id, token, ctx.protocol_version, message["method"], json.dumps(cursor), ctx.scopes, apps, who,
        ctx.discovery,
    )  # fmt: skip
    result = _answers.get(key)
    if result is None:
        response = await runner.run_dispatch(ctx, message, "request")
        assert response is not None
        if "result" not in response:  # an error (a bad cursor): never kept
            await consumer.send_json(json.dumps(response).encode(), status=_status(response))
            return
        result = json.dumps(response["result"]).encode()
        if len(_answers) >= MAX_KEPT_ANSWERS:
            _answers.clear()  # old tokens' answers are dead weight; the live ones come back at once
        _answers[key] = result
    else:
        runner.record_usage(ctx, message, _KEPT, started)  # run_dispatch counted the others
    request_id = json.dumps(message["id"]).encode()
    await consumer.send_json(b'{"jsonrpc": "2.0", "id": ' + request_id + b', "result": ' + result + b"}")


_KEPT: dict[str, Any] = {"result": {}}  # what usage needs to know of a kept answer: it is a result


def _status(response: dict[str, Any]) -> int:
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return ERROR_STATUS.get(code, 200) if isinstance(code, int) else 200


def forget_answers() -> None:
    """Drop every kept answer (tests)."""
    _answers.clear()


async def serve(consumer: McpConsumer, ctx: RequestContext, message: dict[str, Any]) -> None:
    """Run one request; answer JSON, or SSE from its first notification; a disconnect cancels it."""
    if message["method"] in QUIET_METHODS:
        await answer_quietly(consumer, ctx, message)
        return
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    cancelled = asyncio.Event()

    async def emit(notification: dict[str, Any]) -> None:
        if not cancelled.is_set():
            queue.put_nowait(notification)

    task = loop.create_task(
        runner.run_dispatch(ctx.but(emit=emit, cancelled=cancelled), message, "request")
    )
    gone = loop.create_task(consumer.receive())  # the body was read: the next message is the disconnect
    waiter = loop.create_task(queue.get())
    streaming = False
    quiet = False  # past a stream cap: answered as JSON, its notifications dropped (AMB-87)
    slot: stream_slots.Slot | None = None
    stream: pump.Watched | None = None
    try:
        while not streaming:
            done, _ = await asyncio.wait({task, waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone in done and gone.result().get("type") == "http.disconnect":
                consumer.finished = True  # nothing more can be sent
                return  # the finally below cancels the request
            if (waiter in done or not queue.empty()) and not quiet:
                try:
                    slot = await stream_slots.acquire(consumer.tenant, None)
                except stream_slots.StreamCapReached:
                    quiet = True
            if quiet:
                while not queue.empty():
                    queue.get_nowait()
                if waiter in done:
                    waiter = loop.create_task(queue.get())
            elif waiter in done or not queue.empty():
                await consumer.start_sse()
                streaming = True
            if task in done:
                break
        if streaming:
            # The notifications, then the response: queued behind them once the request is done.
            task.add_done_callback(lambda _: queue.put_nowait(_DONE))
            stream = pump.Watched(consumer, queue.get, drains=False, gone=gone, first=waiter)

            async def send(notification: dict[str, Any]) -> bool:
                if notification is _DONE:
                    return False
                await consumer.send_chunk(sse.message_event(notification, None))
                return True

            if await pump.pump(consumer, stream, send) is pump.End.GONE:
                return
        response = task.result()
        if response is None:  # only a notification has no response, and those never get here
            await consumer.end_body()
            return
        if streaming:
            await consumer.send_chunk(sse.message_event(response, None))
            await consumer.end_body()
            return
        await consumer.send_json(json.dumps(response).encode(), status=_status(response))
    finally:
        for pending in (waiter, gone):
            pending.cancel()
        if stream is not None:
            stream.close()
        if not task.done():
            # The connection or this consumer ended first: the request is cancelled, not orphaned.
            cancelled.set()
            task.cancel()
            task.add_done_callback(_retrieve)
        await stream_slots.release(slot)  # last: a cancellation here must not skip the steps above


_DONE: dict[str, Any] = {}  # queued after a streaming request's last notification


def _retrieve(task: asyncio.Task) -> None:
    """Collect a cancelled request's outcome (its own funnel has logged any fault)."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()


async def authorize(consumer: McpConsumer, envelope: Envelope, message: dict[str, Any]) -> None:
    """The token covers the request (403 insufficient_scope, the same step-up as the legacy era)."""
    auth.check_scopes(consumer.caller, consumer.tenant, [message])
