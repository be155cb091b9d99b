"""The admin's "Try this tool": one `tools/call` through the protocol core, made as a client makes it.

The same path a client's call takes after the transport (argument validation, the handler or a
background worker, result checks, shaping for the newest revision), so what an editor sees here is
what a client gets. Notifications the call emits (progress, log messages) are shown beside it:
`stream` yields them as they arrive, for the page that shows them live (AMB-71), and registers the call
with the in-flight table (streams/inflight.py), so a cancel reaches it the way `notifications/cancelled` does.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp_app import catalog
from mcp_app.core import ui_apps
from mcp_app.core.context import Emit, RequestContext, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import LATEST, LATEST_MODERN
from mcp_app.protocol import asking
from mcp_app.protocol.dispatch import dispatch
from mcp_app.streams import inflight
from mcpsite import nesting

# The admin request waits at most this long; a longer call is cancelled (a worker stops it too).
TRY_SECONDS = 60.0
# A call watched live may run longer: the person sees it progress and has a cancel button.
LIVE_SECONDS = 600.0
REQUEST_ID = "admin-try"
# A live call's name, chosen by the server; the cancel request must carry it back unchanged.
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
# A question's id, as protocol.asking names the questions it sends on a legacy call's stream.
QUESTION_ID = re.compile(r"^ask-[A-Za-z0-9_-]{8,64}$")
# The live page can show a form and send the person's answer back (AMB-71): it declares form-mode
# elicitation, as a client would. Without script nothing can answer, so that page declares nothing.
LIVE_CAPABILITIES: dict[str, Any] = {"elicitation": {}}
ANSWER_ACTIONS = frozenset({"accept", "decline", "cancel"})


class TryError(Exception):
    """Why the tool could not be tried; the message is shown on the page."""


@dataclass
class Outcome:
    body: str
    elapsed_ms: int
    is_error: bool = False
    protocol_error: bool = False
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def notifications_text(self) -> str:
        return "\n".join(json.dumps(n, ensure_ascii=False) for n in self.notifications)


_PLACEHOLDERS = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments to start from: each property's default, and a blank value for required ones without."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    example: dict[str, Any] = {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        if "default" in spec:
            example[name] = spec["default"]
        elif name in required:
            kind = spec.get("type")
            example[name] = _PLACEHOLDERS.get(kind if isinstance(kind, str) else "string", "")
    return example


def parse_arguments(raw: str) -> dict[str, Any]:
    try:
        value = nesting.loads(raw or "{}")
    except ValueError as exc:
        raise TryError(f"The arguments are not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise TryError('The arguments must be a JSON object, like {"message": "hello"}.')
    return value


def session_id(user_id: int, run_id: str = "") -> str:
    """The call's session id: a user can only ever cancel their own calls (AMB-71)."""
    return f"admin-try-{user_id}-{run_id}" if run_id else f"admin-try-{user_id}"


async def _resolve(tenant_slug: str, tool_name: str) -> tuple[TenantInfo, str]:
    tenant = await catalog.get_tenant(tenant_slug)
    if tenant is None:
        raise TryError("The tenant is inactive: its endpoint serves nothing, so there is nothing to try.")
    tool = (await catalog.get_catalog(tenant.id)).tools_by_name.get(tool_name)
    if tool is None:
        raise TryError("The tool is disabled: clients cannot call it. Enable it and save first.")
    # As the newest client able to see it: a tool only 2026-07-28 can describe is tried as one.
    return tenant, LATEST if tool.legacy else LATEST_MODERN


def _call(
    tenant: TenantInfo, version: str, user_id: int, session: str, tool_name: str, arguments: dict[str, Any],
    emit: Emit, capabilities: dict[str, Any] | None = None,
) -> tuple[RequestContext, dict[str, Any]]:  # fmt: skip
    # The admin plays a host with MCP Apps: a tool only its app calls is tried as the app calls it (AMB-273).
    capabilities = ui_apps.with_support(capabilities)
    state = SessionState(
        id=session,
        tenant_id=tenant.id,
        protocol_version=version,
        client_capabilities=capabilities or {},
        log_level="debug",
        initialized=True,
        user_id=user_id,
    )
    ctx = RequestContext(
        tenant=tenant,
        protocol_version=version,
        session=state,
        client_capabilities=capabilities or {},
        log_level="debug",  # every log message, in either era
        user_id=user_id,
        request_id=REQUEST_ID,
        progress_token=REQUEST_ID,
        emit=emit,
        cancelled=asyncio.Event(),
    )
    message = {
        "jsonrpc": "2.0",
        "id": REQUEST_ID,
        "method": "tools/call",
        "params": {"name": tool_name, "arguments": arguments, "_meta": {"progressToken": REQUEST_ID}},
    }
    return ctx, message


def _outcome(response: dict[str, Any] | None, elapsed_ms: int, notes: list[dict[str, Any]]) -> Outcome:
    assert response is not None
    if "error" in response:
        body = json.dumps(response["error"], indent=2, ensure_ascii=False)
        return Outcome(body, elapsed_ms, protocol_error=True, notifications=notes)
    result = response["result"]
    body = json.dumps(result, indent=2, ensure_ascii=False)
    return Outcome(body, elapsed_ms, is_error=bool(result.get("isError")), notifications=notes)


async def run(tenant_slug: str, tool_name: str, user_id: int, arguments: dict[str, Any]) -> Outcome:
    """Call the tool as a client of its tenant would, and report the answer (the page without script)."""
    tenant, version = await _resolve(tenant_slug, tool_name)
    notifications: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        notifications.append(message)

    ctx, message = _call(tenant, version, user_id, session_id(user_id), tool_name, arguments, emit)
    started = time.monotonic()
    try:
        async with asyncio.timeout(TRY_SECONDS):
            response = await dispatch(ctx, message)
    except TimeoutError:
        raise TryError(
            f"The tool did not answer within {TRY_SECONDS:g} s, the most the admin waits."
        ) from None
    return _outcome(response, round((time.monotonic() - started) * 1000), notifications)


async def stream(
    tenant_slug: str, tool_name: str, user_id: int, arguments: dict[str, Any], run_id: str
) -> AsyncIterator[dict[str, Any]]:
    """The call as events, each as soon as it happens: started, notification..., then one of result,
    problem or cancelled. Closing the iterator early (the page went away) cancels the call."""
    try:
        tenant, version = await _resolve(tenant_slug, tool_name)
    except TryError as exc:
        yield {"event": "problem", "message": str(exc)}
        return
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def emit(message: dict[str, Any]) -> None:
        queue.put_nowait(message)

    session = session_id(user_id, run_id)
    ctx, message = _call(tenant, version, user_id, session, tool_name, arguments, emit, LIVE_CAPABILITIES)
    started = time.monotonic()

    async def call() -> dict[str, Any] | None:
        async with asyncio.timeout(LIVE_SECONDS):
            return await dispatch(ctx, message)

    task = asyncio.get_running_loop().create_task(call())
    task.add_done_callback(lambda _task: queue.put_nowait(None))
    # The same table notifications/cancelled goes through: a cancel from any process stops it.
    inflight.register(session, REQUEST_ID, task, ctx.cancelled)
    try:
        yield {"event": "started", "run": run_id, "version": version}
        while (note := await queue.get()) is not None:
            if "id" in note and "method" in note:  # a question for the person (protocol.asking)
                yield {"event": "question", "ms": _ms(started), "id": note["id"], "method": note["method"],
                       "params": note.get("params", {})}  # fmt: skip
            else:
                yield {"event": "notification", "ms": _ms(started), "message": note}
        if task.cancelled():
            yield {"event": "cancelled", "elapsed_ms": _ms(started)}
        elif isinstance(task.exception(), TimeoutError):
            yield {"event": "problem", "message": f"The tool did not answer within {LIVE_SECONDS:g} s."}
        elif task.exception() is not None:
            yield {"event": "problem", "message": f"The call failed: {task.exception()!r}"}
        else:
            outcome = _outcome(task.result(), _ms(started), [])
            yield {
                "event": "result",
                "body": outcome.body,
                "elapsed_ms": outcome.elapsed_ms,
                "is_error": outcome.is_error,
                "protocol_error": outcome.protocol_error,
            }
    finally:
        inflight.unregister(session, REQUEST_ID, task)
        if not task.done():  # the page closed its request: stop the call as a disconnect does
            ctx.cancelled.set()
            task.cancel()


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


async def answer(user_id: int, run_id: str, question_id: str, result: dict[str, Any]) -> None:
    """The person's answer to a question of their live call, delivered as a client's response is."""
    response = {"jsonrpc": "2.0", "id": question_id, "result": result}
    await asking.deliver(session_id(user_id, run_id), response)


def answer_result(action: str, raw_content: str) -> dict[str, Any]:
    """An ElicitResult from the page's form: the action, and for accept the content object."""
    if action not in ANSWER_ACTIONS:
        raise TryError(f"The answer's action must be one of {', '.join(sorted(ANSWER_ACTIONS))}.")
    if action != "accept":
        return {"action": action}
    try:
        content = nesting.loads(raw_content or "{}")
    except ValueError as exc:
        raise TryError(f"The answer is not valid JSON: {exc}.") from None
    if not isinstance(content, dict):
        raise TryError("The answer must be a JSON object of the form's fields.")
    return {"action": "accept", "content": content}


async def cancel(user_id: int, run_id: str, reason: str) -> None:
    """Cancel the user's live call `run_id` wherever it runs (unknown or finished: nothing happens)."""
    await inflight.cancel(session_id(user_id, run_id), REQUEST_ID, reason)
