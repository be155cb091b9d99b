"""The admin's "Try this tool": one `tools/call` through the protocol core, made as a client makes it.

The same path a client's call takes after the transport (argument validation, the handler or a
background worker, result checks, shaping for the revision tried), so what an editor sees here is
what a client gets. Notifications the call emits (progress, log messages) are shown beside it:
`stream` yields them as they arrive, for the page that shows them live (AMB-71), and registers the call
with the in-flight table (streams/inflight.py), so a cancel reaches it the way `notifications/cancelled` does.
The live page plays the client (try_client.py, AMB-250): the era and capabilities the person chose, and
their answers to the tool's questions; a 2026-07-28 call's rounds are answered and retried here.
`definition_for` is the one place that says which definition of the tool is tried.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer

from lib import nesting
from mcp_app.admin import try_render
from mcp_app.admin.try_client import DEFAULT_CAPABILITIES, Client
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import ToolDef
from mcp_app.core.versions import is_modern
from mcp_app.drafts import trial
from mcp_app.infra import notify
from mcp_app.models import Tool
from mcp_app.protocol import asking
from mcp_app.protocol.dispatch import dispatch
from mcp_app.streams import inflight

# The admin request waits at most this long; a longer call is cancelled (a worker stops it too).
TRY_SECONDS = 60.0
# A call watched live may run longer: the person sees it progress and has a cancel button.
LIVE_SECONDS = 600.0
REQUEST_ID = trial.REQUEST_ID
# A live call's name, chosen by the server; the cancel request must carry it back unchanged.
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
# A question's id, as protocol.asking names the questions it sends on a legacy call's stream.
QUESTION_ID = re.compile(r"^ask-[A-Za-z0-9_-]{8,64}$")
# A 2026-07-28 call asks round after round until answered; the page stops after this many.
MAX_ROUNDS = 20


# Shared with the API's trial (drafts/trial.py): which definition is tried, and how it is handed over.
TryError = trial.TrialError
definition_for = trial.definition_for
default_era = trial.default_era
_visible = trial.visible
_call = trial.call_context


@dataclass
class Outcome:
    body: str
    elapsed_ms: int
    is_error: bool = False
    protocol_error: bool = False
    notifications: list[dict[str, Any]] = field(default_factory=list)
    # The answer as a client shows it (try_render.view).
    view: dict[str, Any] = field(default_factory=dict)

    @property
    def notifications_text(self) -> str:
        return "\n".join(json.dumps(n, ensure_ascii=False) for n in self.notifications)


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


def default_client(tool: ToolDef) -> Client:
    return Client(default_era(tool), frozenset(DEFAULT_CAPABILITIES))


def _outcome(response: dict[str, Any] | None, elapsed_ms: int, notes: list[dict[str, Any]]) -> Outcome:
    assert response is not None
    view = try_render.view(response)
    if "error" in response:
        body = json.dumps(response["error"], indent=2, ensure_ascii=False)
        return Outcome(body, elapsed_ms, protocol_error=True, notifications=notes, view=view)
    result = response["result"]
    body = json.dumps(result, indent=2, ensure_ascii=False)
    return Outcome(body, elapsed_ms, is_error=bool(result.get("isError")), notifications=notes, view=view)


async def run(tool_row: Tool, user_id: int, arguments: dict[str, Any], era: str = "") -> Outcome:
    """Call the tool as a client of its tenant would, and report the answer (the page without script:
    its client speaks `era`, or the default, and declares nothing, since nothing could answer)."""
    answer = await trial.call_once(tool_row, user_id, session_id(user_id), arguments, era, TRY_SECONDS)
    return _outcome(answer.response, answer.elapsed_ms, answer.notifications)


async def _play(ctx: RequestContext, message: dict[str, Any]) -> dict[str, Any] | None:
    """The call, played as a client plays it: a 2026-07-28 InputRequiredResult's questions are put to
    the person (as a legacy session's are, through protocol.asking) and the call is sent again with
    their answers and the round's requestState, until it ends."""
    for _ in range(MAX_ROUNDS):
        response = await dispatch(ctx, message)
        result = (response or {}).get("result")
        if isinstance(result, dict) and isinstance(result.get("task"), dict):  # 2025-11-25's handle
            return await _follow_task(ctx, result["task"])
        if isinstance(result, dict) and result.get("resultType") == "task":  # the tasks extension's
            return await _follow_task(ctx, result)
        if not isinstance(result, dict) or result.get("resultType") != "input_required":
            return response
        answers = await _answers(ctx, result.get("inputRequests") or {})
        params = {**message["params"], "inputResponses": answers, "requestState": result.get("requestState")}
        message = {**message, "params": params}
    raise TryError(f"The tool asked {MAX_ROUNDS} rounds of questions without finishing; the page stopped.")


async def _answers(ctx: RequestContext, requests: dict[str, Any]) -> dict[str, Any]:
    """The person's answers to a round's (or a task's) questions, asked one after the other."""
    ask = asking.session_asker(ctx)
    answers: dict[str, Any] = {}
    for key, request in requests.items():
        try:
            answers[key] = await ask(request)
        except ToolError as exc:  # the person declined, or did not answer in time
            raise TryError(f"The page's client stopped the call: {exc}") from None
    return answers


async def _follow_task(ctx: RequestContext, task: dict[str, Any]) -> dict[str, Any] | None:
    """A call answered with a task (the client declared tasks), followed as such a client follows it:
    2025-11-25 waits on tasks/result (its questions come on the call's stream); 2026-07-28 polls
    tasks/get and answers an input_required task with tasks/update. Stopping the call cancels the task."""
    task_id = task.get("taskId")
    await ctx.emit({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})

    def request(method: str, **params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": REQUEST_ID, "method": method, "params": {"taskId": task_id, **params}}

    try:
        if not is_modern(ctx.protocol_version):
            return await dispatch(ctx, request("tasks/result"))
        answered: set[str] = set()
        status = task.get("status")
        while True:
            response = await dispatch(ctx, request("tasks/get"))
            state = (response or {}).get("result")
            if not isinstance(state, dict):
                return response
            if state.get("status") != status:  # shown in the log as a client would see it change
                status = state.get("status")
                shown = {k: v for k, v in state.items() if k not in ("result", "error", "inputRequests")}
                await ctx.emit({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": shown})
            if state.get("status") in ("completed", "failed", "cancelled"):
                if "result" in state or "error" in state:
                    return {"jsonrpc": "2.0", "id": REQUEST_ID, **{k: state[k] for k in ("result", "error") if k in state}}
                raise TryError(f"The task ended {state.get('status')} without a result.")
            waiting = {k: v for k, v in (state.get("inputRequests") or {}).items() if k not in answered}
            if state.get("status") == "input_required" and waiting:
                answers = await _answers(ctx, waiting)
                answered.update(answers)
                await dispatch(ctx, request("tasks/update", inputResponses=answers))
            await asyncio.sleep(max(0.1, int(state.get("pollIntervalMs") or 500) / 1000))
    except asyncio.CancelledError:
        await asyncio.shield(dispatch(ctx, request("tasks/cancel")))
        raise


async def stream(
    tool_row: Tool, user_id: int, arguments: dict[str, Any], run_id: str, client: Client | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The call as events, each as soon as it happens: started, notification and question..., then one of
    result, problem or cancelled. Closing the iterator early (the page went away) cancels the call.
    `client` is the one the page plays (its default: the tool's newest era, a capable client)."""
    try:
        tenant, tool = await definition_for(tool_row)
        client = client or default_client(tool)
        _visible(tool, client.version)
    except TryError as exc:
        yield {"event": "problem", "message": str(exc)}
        return
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def emit(message: dict[str, Any]) -> None:
        queue.put_nowait(message)

    session = session_id(user_id, run_id)
    capabilities = client.capabilities()
    ctx, message = _call(tenant, client.version, user_id, session, tool, arguments, emit, capabilities)
    started = time.monotonic()

    async def call() -> dict[str, Any] | None:
        async with asyncio.timeout(LIVE_SECONDS):
            return await _play(ctx, message)

    task = asyncio.get_running_loop().create_task(call())
    task.add_done_callback(lambda _task: queue.put_nowait(None))
    # A 2025-11-25 task speaks on its session's stream once the call has its handle: listen as one.
    listening = _listen(session, queue) if "tasks" in capabilities else None
    # The same table notifications/cancelled goes through: a cancel from any process stops it.
    inflight.register(session, REQUEST_ID, task, ctx.cancelled)
    try:
        yield {"event": "started", "run": run_id, "version": client.version, "capabilities": capabilities}
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
        elif isinstance(task.exception(), TryError):
            yield {"event": "problem", "message": str(task.exception())}
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
                "view": outcome.view,
            }
    finally:
        if listening is not None:
            listening.cancel()
        inflight.unregister(session, REQUEST_ID, task)
        if not task.done():  # the page closed its request: stop the call as a disconnect does
            ctx.cancelled.set()
            task.cancel()


def _listen(session: str, queue: asyncio.Queue[dict[str, Any] | None]) -> asyncio.Task[None] | None:
    """What the session's stream would carry (a task's progress, log messages and questions), into
    `queue`, until cancelled; None without a channel layer."""
    layer = get_channel_layer()
    if layer is None:
        return None

    async def listen() -> None:
        channel = await layer.new_channel()
        await layer.group_add(notify.session_group(session), channel)
        try:
            while True:
                event = await layer.receive(channel)
                if event.get("type") == "mcp.session_message" and isinstance(event.get("message"), dict):
                    queue.put_nowait(event["message"])
        finally:
            await asyncio.shield(layer.group_discard(notify.session_group(session), channel))

    return asyncio.get_running_loop().create_task(listen())


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


async def answer(user_id: int, run_id: str, question_id: str, body: dict[str, Any]) -> None:
    """The person's answer to a question of their live call (try_client.answer_body: a result or an
    error), delivered as a client's response is."""
    response = {"jsonrpc": "2.0", "id": question_id, **body}
    await asking.deliver(session_id(user_id, run_id), response)


async def cancel(user_id: int, run_id: str, reason: str) -> None:
    """Cancel the user's live call `run_id` wherever it runs (unknown or finished: nothing happens)."""
    await inflight.cancel(session_id(user_id, run_id), REQUEST_ID, reason)
