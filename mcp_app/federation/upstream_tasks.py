"""An upstream tool that runs as a task on its upstream, followed to its result (AMB-199).

`call` sends the tools/call task-augmented (2025-11-25: `params.task`; 2026-07-28: the
`io.modelcontextprotocol/tasks` extension declared in this request's client capabilities), then follows
the upstream's task: `tasks/get` every `pollInterval` (clamped), until it is terminal; the result is the
2026-07-28 task's inlined `result` or, on a legacy session, `tasks/result` (which also carries the
questions of a task that is `input_required`, as server-to-client requests our bridge answers). It
returns the CallToolResult as a plain call would have. When the call is cancelled (our client cancels,
or the deadline passes) or abandoned, the upstream task is cancelled with `tasks/cancel` before the
cancellation goes on. The upstream's task id stays in here: our client only ever sees our own tasks.

The SDK 2.3 client has no tasks: its task types are types-only, `send_request` validates a tools/call
answer as a CallToolResult (a task handle fails it), and its 2026-07-28 stamp writes the same client
capabilities into every request of a client (ours are pooled, shared by every call of the key). So the
requests go through the session's own stamp and dispatcher (`_send`), the capabilities of a task call
extended for that request only; the e2e tests run it against the SDK's server (tests/e2e/test_upstream_tasks.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from mcp_app.federation.errors import UpstreamError

logger = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"
# tasks/get is asked no more often than this, whatever pollInterval says (0 would spin), and at
# least this often (a task that ends is noticed soon; the call's deadline bounds the whole).
MIN_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 5.0
DEFAULT_POLL_SECONDS = 1.0
# How long the upstream's tasks/cancel may take once our call is over; past it, we stop waiting.
CANCEL_SECONDS = 5.0
TERMINAL = ("completed", "failed", "cancelled")

_RESULT: TypeAdapter[types.CallToolResult] = TypeAdapter(types.CallToolResult)


def runs_as_task(definition: Any) -> str:
    """How the upstream runs a tool, by its (pinned) wire definition: "required", "optional" or
    "forbidden" (`execution.taskSupport`; absent means forbidden)."""
    execution = definition.get("execution") if isinstance(definition, dict) else None
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if support in ("required", "optional") else "forbidden"


def refused_for_want_of_tasks(exc: MCPError, client: Any) -> bool:
    """Whether the upstream refused a plain call because the tool runs only as a task: 2026-07-28's
    -32021 naming the tasks extension, or a 2025-11-25 session's -32601 for a tools/call from a server
    that declares task-augmented calls (the spec's answer). Either was refused before the tool ran."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        capabilities = getattr(client.server_capabilities, "tasks", None)
        requests = getattr(capabilities, "requests", None)
        tools = getattr(requests, "tools", None)
        return exc.code == -32601 and getattr(tools, "call", None) is not None
    data = exc.error.data if isinstance(exc.error.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return exc.code == -32021 and isinstance(extensions, dict) and EXTENSION in extensions


async def call(
    session: Any,
    name: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None,
    on_progress: Any,
    label: str,
) -> types.CallToolResult:
    """tools/call of ``name`` as a task on the upstream, followed to its CallToolResult (module docstring)."""
    modern = session.protocol_version in MODERN_PROTOCOL_VERSIONS
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = dict(meta)
    if not modern:
        params["task"] = {}  # no ttl asked: the upstream's own; our deadline bounds our interest anyway
    creating = asyncio.ensure_future(_send(session, "tools/call", params, modern, on_progress))
    try:
        answer = await asyncio.shield(creating)
    except asyncio.CancelledError:
        await _cancel_once_created(session, creating, modern)
        raise
    task = _task_of(answer, modern)
    if task is None:
        return _result(answer, label)  # the upstream chose to answer at once (2026-07-28: its decision)
    task_id = task.get("taskId")
    if not isinstance(task_id, str):
        raise UpstreamError(f"Upstream {label} answered with a task that has no id.")
    try:
        return await _follow(session, task, task_id, modern, label)
    except _Ended:
        raise
    except (asyncio.CancelledError, UpstreamError):
        # Our client cancelled, the deadline passed, or we gave the task up: it must not run on.
        await _cancel(session, task_id, modern)
        raise


async def _follow(
    session: Any, task: dict[str, Any], task_id: str, modern: bool, label: str
) -> types.CallToolResult:
    while True:
        status = task.get("status")
        if status == "cancelled":
            raise _Ended(f"Upstream {label} cancelled the task running this call.")
        if not modern and status in ("completed", "failed", "input_required"):
            # tasks/result answers what the call would have (a result, or its JSON-RPC error), and
            # brings the questions of an input_required task with it.
            return _result(await _send(session, "tasks/result", {"taskId": task_id}, modern), label)
        if modern and status == "completed":
            return _result(task.get("result"), label)
        if modern and status == "failed":
            error = found if isinstance(found := task.get("error"), dict) else {}
            raise _Ended(
                f"Upstream {label} failed the call: {str(error.get('message') or 'no reason given')[:500]}"
            )
        if modern and status == "input_required":
            raise UpstreamError(
                f"Upstream {label} asked for input through its task, which is not relayed yet; the task "
                "was cancelled."
            )
        await asyncio.sleep(_interval(task, modern))
        task = await _send(session, "tasks/get", {"taskId": task_id}, modern)


class _Ended(UpstreamError):
    """The upstream's task ended without a result: nothing left to cancel."""


async def _cancel_once_created(session: Any, creating: asyncio.Future, modern: bool) -> None:
    """Our call was cancelled while the upstream made its task: the handle may be on its way (the
    upstream may have made the task already), so wait for it, bounded, and cancel that task."""
    done, _ = await asyncio.wait({creating}, timeout=CANCEL_SECONDS)
    if not done:
        creating.cancel()
        return
    if creating.cancelled() or creating.exception() is not None:
        return
    task = _task_of(creating.result(), modern)
    if task is not None and isinstance(task.get("taskId"), str):
        await _cancel(session, task["taskId"], modern)


async def _cancel(session: Any, task_id: str, modern: bool) -> None:
    """tasks/cancel upstream, best effort and bounded; in a task of its own, so that the cancellation of
    ours already delivered does not stop it. A further cancellation of ours ends the wait (never
    swallowed); the request still goes out."""
    sent = asyncio.ensure_future(_send(session, "tasks/cancel", {"taskId": task_id}, modern))
    sent.add_done_callback(_quietly)
    done, _ = await asyncio.wait({sent}, timeout=CANCEL_SECONDS)
    if not done:
        sent.cancel()
        logger.info("upstream task cancel not confirmed within %s s", CANCEL_SECONDS)


def _quietly(sent: asyncio.Future) -> None:
    # A task that ended meanwhile refuses (-32602), a lost connection cannot carry it: either way there is
    # nothing more to do for this call, whose own outcome wins.
    if not sent.cancelled() and (exc := sent.exception()) is not None:
        logger.info("upstream task cancel failed: %s", type(exc).__name__)


def _interval(task: dict[str, Any], modern: bool) -> float:
    value = task.get("pollIntervalMs" if modern else "pollInterval")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return DEFAULT_POLL_SECONDS
    return min(max(value / 1000, MIN_POLL_SECONDS), MAX_POLL_SECONDS)


def _task_of(answer: dict[str, Any], modern: bool) -> dict[str, Any] | None:
    """The task handle of a task-augmented tools/call answer, or None for a plain result."""
    if modern:
        return answer if answer.get("resultType") == "task" else None
    task = answer.get("task")
    return task if isinstance(task, dict) else None


def _result(raw: Any, label: str) -> types.CallToolResult:
    try:
        return _RESULT.validate_python(raw, by_name=False)
    except ValidationError:
        raise UpstreamError(f"Upstream {label} ended its task without a valid tool result.") from None


async def _send(
    session: Any, method: str, params: dict[str, Any], modern: bool, on_progress: Any = None
) -> dict[str, Any]:
    """One request through the session's stamp and dispatcher, its raw result (module docstring)."""
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)
    if modern:
        meta = data["params"]["_meta"]
        capabilities = dict(meta.get(types.CLIENT_CAPABILITIES_META_KEY) or {})
        capabilities["extensions"] = {**(capabilities.get("extensions") or {}), EXTENSION: {}}
        meta[types.CLIENT_CAPABILITIES_META_KEY] = capabilities
        if method.startswith("tasks/"):
            # SEP-2663: a tasks/* request names its task in Mcp-Name (the SDK mirrors only its own methods).
            opts.setdefault("headers", {})[MCP_NAME_HEADER] = encode_header_value(params["taskId"])
    if on_progress is not None:
        opts["on_progress"] = on_progress
    return await session._dispatcher.send_raw_request(method, data["params"], opts)
