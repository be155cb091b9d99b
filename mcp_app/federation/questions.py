"""An upstream's questions (elicitation, sampling, roots), put to the caller of the call they belong to.

The caller of `client.call_tool` passes an `Asking`: `ask` takes named requests and returns the
answers by name (the handler asks its own client with them, in either era, and may raise). How the
upstream asks depends on its era:

- Legacy session: a server-to-client request during the call, on the call's own SSE stream. The SDK
  runs our callbacks (`on_elicit`, `on_sample`, `on_list_roots`, given to every pooled client) in the
  context of the task that sent the call, so `CURRENT` names the call's `Bridge`; a question that
  belongs to no call that can ask (one sent on the session's GET stream) is refused, never guessed.
  Questions are named `q1`, `q2`… in the order the upstream asks them within the call. While one is
  out, the call's deadline is paused (the person's time is not the upstream's; the ask has its own
  bound). An `ask` that raises ends the call: the upstream call is cancelled first, then the
  question is answered with an error, and `call_tool` raises what `ask` raised.
- 2026-07-28: an InputRequiredResult. Its requests are asked together, named `r<round>.<key>`, and
  the call is sent again with the answers and the upstream's requestState, at most `MAX_ROUNDS`
  times. Before asking, `remember` is given the `Round`; a later run of the same call may pass it
  back as `resume` to continue from that round instead of the upstream's first.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_app.federation.errors import UpstreamError
from mcp_app.federation.transport import CURRENT_CALL

# Named requests -> answers by name (a name may be missing: that question was not put to anyone).
Ask = Callable[[dict[str, dict[str, Any]]], Awaitable[dict[str, dict[str, Any]]]]

# InputRequiredResults answered in one call before it is abandoned: an upstream that never stops
# asking cannot keep a call (and a person) busy for ever.
MAX_ROUNDS = 10
# How long a question waits, once its call is ended, for the upstream call's cancellation to go out
# before it is answered with an error (the cancellation first, so the tool stops rather than goes on).
STOP_SECONDS = 5.0

ANSWERS: dict[str, TypeAdapter[Any]] = {
    "elicitation/create": TypeAdapter(types.ElicitResult),
    "sampling/createMessage": TypeAdapter(types.CreateMessageResult | types.CreateMessageResultWithTools),
    "roots/list": TypeAdapter(types.ListRootsResult),
}


@dataclass(frozen=True)
class Round:
    """One InputRequiredResult of a 2026-07-28 upstream: its number, state and requests (by our names)."""

    number: int
    request_state: str | None
    requests: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.number, "s": self.request_state, "r": self.requests}

    @classmethod
    def from_dict(cls, data: Any) -> Round | None:
        """The round a `to_dict` made, or None when ``data`` is not one."""
        if not isinstance(data, dict):
            return None
        number, state, requests = data.get("n"), data.get("s"), data.get("r")
        if not isinstance(number, int) or not 0 < number <= MAX_ROUNDS:
            return None
        if not (state is None or isinstance(state, str)) or not isinstance(requests, dict):
            return None
        if not all(isinstance(k, str) and isinstance(v, dict) for k, v in requests.items()):
            return None
        return cls(number, state, requests)


@dataclass
class Asking:
    """How a call's questions reach its caller (see the module's docstring)."""

    ask: Ask
    resume: Round | None = None
    remember: Callable[[Round], None] | None = None


@dataclass
class Bridge:
    """One call's legacy questions: their numbering, and the end of the call when `ask` raised."""

    asking: Asking | None
    asked: int = 0
    # What `ask` raised: the call ends with it, once the upstream call is cancelled.
    cause: BaseException | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the upstream call is over (answered or cancelled): questions still out give up.
    over: asyncio.Event = field(default_factory=asyncio.Event)


CURRENT: contextvars.ContextVar[Bridge | None] = contextvars.ContextVar("mcp_federation_bridge", default=None)


class Stopped(Exception):
    """The caller's `ask` ended the call; ``cause`` is what it raised (call_tool raises it)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("the caller's question ended the call")
        self.cause = cause


def _request(method: str, params: Any) -> dict[str, Any]:
    wire = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
    wire.pop("_meta", None)  # the upstream's request metadata is not our client's business
    return {"method": method, "params": wire}


def answer_of(method: str, answer: Any) -> Any:
    """The answer as the SDK's result model for ``method``; UpstreamError when it is not one."""
    try:
        return ANSWERS[method].validate_python(answer)
    except (KeyError, ValidationError):
        raise UpstreamError(f"The client's answer to {method} is not a valid result.") from None


async def _bridge(method: str, params: Any) -> Any:
    bridge = CURRENT.get()
    if bridge is None:  # sent outside a call's exchange (the session's GET stream): whose would it be?
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method} is not related to a call.")
    if bridge.asking is None:
        return types.ErrorData(
            code=types.INVALID_REQUEST, message=f"{method}: this call has no client to ask."
        )
    bridge.asked += 1
    name = f"q{bridge.asked}"
    state = CURRENT_CALL.get()
    if state is not None:
        state.pause_deadline()
    asking = asyncio.ensure_future(bridge.asking.ask({name: _request(method, params)}))
    over = asyncio.ensure_future(bridge.over.wait())
    try:
        await asyncio.wait({asking, over}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        over.cancel()
        if not asking.done():
            asking.cancel()
            await asyncio.wait({asking})
        if state is not None:
            state.resume_deadline()
    if asking.cancelled():
        return types.ErrorData(
            code=types.INVALID_REQUEST, message="The call this question belongs to has ended."
        )
    try:
        return answer_of(method, asking.result().get(name))
    except Exception as exc:  # noqa: BLE001 - whatever `ask` raised ends the call, and is the call's to raise
        bridge.cause = exc
        bridge.stop.set()
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await bridge.over.wait()
        except TimeoutError:
            pass
        # Our own exceptions (`ask` is ours): "input required: …", "missing client capability: …", a message.
        text = getattr(exc, "message", None) or str(exc) or "The call ended before the client answered."
        return types.ErrorData(code=types.INVALID_REQUEST, message=str(text)[:500])


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> Any:
    """The SDK's elicitation callback of every pooled client."""
    return await _bridge("elicitation/create", params)


async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
    """The SDK's sampling callback of every pooled client."""
    return await _bridge("sampling/createMessage", params)


async def on_list_roots(context: Any) -> Any:
    """The SDK's roots callback of every pooled client."""
    return await _bridge("roots/list", None)


async def send(bridge: Bridge, request: Awaitable[Any]) -> Any:
    """``request``'s result, unless a question of it ended the call first: then the request is
    cancelled (a legacy upstream is told) and Stopped is raised."""
    sent = asyncio.ensure_future(request)
    stop = asyncio.ensure_future(bridge.stop.wait())
    try:
        await asyncio.wait({sent, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not sent.done():
            sent.cancel()
            await asyncio.wait({sent})
        bridge.over.set()
    if bridge.cause is not None:
        raise Stopped(bridge.cause)
    return sent.result()


def round_of(number: int, result: types.InputRequiredResult) -> Round:
    """An InputRequiredResult as a Round, its requests named ``r<number>.<key>``."""
    requests = {
        f"r{number}.{key}": _request(request.method, request.params)
        for key, request in (result.input_requests or {}).items()
    }
    return Round(number, result.request_state, requests)


async def responses(asking: Asking, round_: Round) -> dict[str, Any]:
    """Ask the round's requests; the answers as the upstream's inputResponses (by its own keys)."""
    answers = await asking.ask(round_.requests)
    found: dict[str, Any] = {}
    for name, request in round_.requests.items():
        if answers.get(name) is not None:
            found[name.split(".", 1)[1]] = answer_of(request["method"], answers[name])
    return found
