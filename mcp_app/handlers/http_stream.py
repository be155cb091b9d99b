"""The http kind's streamed replies: a long tool without code, its endpoint reporting as it works.

An endpoint that answers ``Content-Type: application/x-ndjson`` (or ``application/jsonl``) sends one
JSON object a line, each with a ``"type"``, read as they arrive:

- ``{"type": "progress", "progress": 3, "total": 10, "message": "…"}``: notifications/progress on
  the call's stream (when the request has a progress token); a value that does not increase is
  dropped, as the spec wants each larger than the last.
- ``{"type": "log", "level": "info", "data": …, "logger": "…"}``: notifications/message, when the
  request's log level admits it (``level`` defaults to info).
- ``{"type": "ask", "id": "…", "request": {"method": …, "params": {…}}, "reply_url": "…"}``: the
  client is asked (elicitation/create in form mode, sampling/createMessage or roots/list) and
  ``{"id": …, "result": <the client's answer>}`` is POSTed to ``reply_url`` (relative to the tool's
  URL, on its origin: the secret headers go with it), through the same guard; the stream goes on.
- ``{"type": "ask", "requests": {"<key>": {"method": …, "params": {…}}, …}, "reply_url": "…"}``:
  several questions of any kinds in one round (AMB-284), each under its key: asked together on
  2026-07-28 (one InputRequiredResult naming them all), one after another on a legacy session
  (stopping at an elicitation not accepted); ``{"results": {"<key>": <answer>, …}}`` is POSTed back
  once, every answer under its key.
- ``{"type": "error", "code": -32603, "message": "…", "data": …}``: the tool failed at the protocol
  level (AMB-285): the call answers this JSON-RPC error, a task ends ``failed``; it ends the stream.
- ``{"type": "task"}``: the questions are asked (AMB-286). On a 2026-07-28 call of a tool configured
  ``asks_before_task``, the call answers with a task here and the task calls the endpoint again, its
  questions answered from the rounds; anywhere else it is passed over.
- ``{"type": "result", …}``: the rest of the object is the reply, mapped as a plain JSON reply is
  (``content``/``structuredContent``/``isError``); it ends the stream.

Other types are ignored, so an endpoint may send what a later platform understands. A line that is
not such an object, or a known event with a wrong field, is an error result naming the line; so is a
stream that ends without a result. A cancelled call closes the stream. The http kind (http.py) opens
the exchange, owns the size cap and the timeouts, and posts the replies; this module reads events.

On 2026-07-28 an unanswered question ends the round (InputRequired): the stream is closed, and the
client's retry calls the endpoint again from the start, with the same ``Idempotency-Key``; its
questions, asked again in the same order, are answered at once from the retry. So an endpoint must
do nothing it cannot do twice before its last question, as a python handler must.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urljoin

from lib import nesting
from mcp_app.core import notifications, ssrf
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ProtocolError, ToolError
from mcp_app.handlers import cancelling, form

STREAM_TYPES = ("application/x-ndjson", "application/jsonl")
NO_RESULT = "The endpoint ended its stream without a result."
# The most questions one ask event may carry (a form's limit too, AMB-123), and a key's length.
MAX_ASKS, MAX_KEY_CHARS = 10, 64
CANCELLED = "The call was cancelled; the endpoint's stream was closed."

# Posts {"id", "result"} to a reply URL (the http kind's send: the guard, the secret headers).
PostReply = Callable[[str, dict[str, Any]], Awaitable[None]]


class _Malformed(Exception):
    """What is wrong with a line; the caller names the line."""


def is_stream(content_type: str) -> bool:
    """Whether a reply of this Content-Type is a stream of events."""
    return content_type.split(";", 1)[0].strip().lower() in STREAM_TYPES


async def follow(
    ctx: RequestContext, chunks: AsyncIterator[bytes], url: str, post_reply: PostReply
) -> dict[str, Any]:
    """Relay the events of a streamed reply; return its result event, without its ``"type"``.

    Raises ToolError for a malformed line, a stream without a result, or a cancelled call.
    """
    relay = _relay(ctx, _lines(chunks), url, post_reply)
    return await cancelling.unless_cancelled(ctx.cancelled, relay, CANCELLED)


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """The body's lines as they arrive, numbered from 1 (a last line may lack its newline)."""
    buffer = bytearray()
    number = 0
    async for chunk in chunks:
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            number += 1
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            yield number, line
    if buffer.strip():
        yield number + 1, bytes(buffer)


async def _relay(
    ctx: RequestContext, lines: AsyncIterator[tuple[int, bytes]], url: str, post_reply: PostReply
) -> dict[str, Any]:
    last_progress: float | None = None
    async for number, line in lines:
        if not line.strip():
            continue
        try:
            event = _event(line)
            kind = event["type"]
            if kind == "result":
                return {key: value for key, value in event.items() if key != "type"}
            if kind == "progress":
                value, total, message = _progress(event)
                if last_progress is None or value > last_progress:
                    last_progress = value
                    await notifications.progress(ctx, value, total, message)
            elif kind == "log":
                level, data, logger = _log(event)
                await notifications.log(ctx, level, data, logger)
            elif kind == "ask":
                ask_id, questions, reply_url = _ask(event, url)
                answers = await _asked(ctx, questions)
                if ask_id is None:
                    await post_reply(reply_url, {"results": answers})
                else:
                    await post_reply(reply_url, {"id": ask_id, "result": answers[str(ask_id)]})
            elif kind == "error":
                raise _protocol_error(event)
            elif kind == "task":
                await ctx.as_task()
        except _Malformed as exc:
            raise ToolError(f"The endpoint's stream has a malformed line {number}: {exc}") from None
    raise ToolError(NO_RESULT)


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = nesting.loads(line)
    except nesting.TooDeep as exc:
        raise _Malformed(f"it is {exc}.") from None
    except ValueError:
        raise _Malformed("it is not JSON.") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise _Malformed('it is not a JSON object with a string "type".')
    return event


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _optional(event: dict[str, Any], name: str, check: Callable[[Any], bool], what: str) -> Any:
    value = event.get(name)
    if value is not None and not check(value):
        raise _Malformed(f'"{name}" must be {what}.')
    return value


def _progress(event: dict[str, Any]) -> tuple[float, float | None, str | None]:
    if not _is_number(event.get("progress")):
        raise _Malformed('a progress event needs a number "progress".')
    total = _optional(event, "total", _is_number, "a number")
    message = _optional(event, "message", lambda v: isinstance(v, str), "a string")
    return event["progress"], total, message


def _log(event: dict[str, Any]) -> tuple[str, Any, str | None]:
    level = event.get("level", "info")
    if level not in notifications.LOG_LEVELS:
        raise _Malformed(f'"level" must be one of {", ".join(notifications.LOG_LEVELS)}.')
    if "data" not in event:
        raise _Malformed('a log event needs "data".')
    logger = _optional(event, "logger", lambda v: isinstance(v, str), "a string")
    return level, event["data"], logger


def _ask(event: dict[str, Any], url: str) -> tuple[str | int | None, dict[str, dict[str, Any]], str]:
    """The event's id (None for several questions), its questions by key, and the reply URL."""
    if "requests" in event:
        if "id" in event or "request" in event:
            raise _Malformed('an ask event has either "id" and "request", or "requests".')
        requests = event["requests"]
        if not isinstance(requests, dict) or not 1 <= len(requests) <= MAX_ASKS:
            raise _Malformed(f'"requests" must be an object of 1 to {MAX_ASKS} questions by key.')
        for key in requests:
            if not key or len(key) > MAX_KEY_CHARS:
                raise _Malformed(f"a question's key must be 1 to {MAX_KEY_CHARS} characters.")
        questions = {key: _question(request) for key, request in requests.items()}
        return None, questions, _reply_url(event.get("reply_url"), url)
    ask_id = event.get("id")
    if not isinstance(ask_id, (str, int)) or isinstance(ask_id, bool):
        raise _Malformed('an ask event needs an "id", a string or an integer.')
    return ask_id, {str(ask_id): _question(event.get("request"))}, _reply_url(event.get("reply_url"), url)


def _question(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict) or not isinstance(request.get("params", {}), dict):
        raise _Malformed('"request" must be an object with a "method" and object "params".')
    question = {"method": request.get("method"), "params": request.get("params", {})}
    _check_question(question)
    return question


def _protocol_error(event: dict[str, Any]) -> ProtocolError:
    code, message = event.get("code"), event.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not -(2**31) <= code < 2**31:
        raise _Malformed('an error event needs an integer "code" (a JSON-RPC error code).')
    if not isinstance(message, str) or not message:
        raise _Malformed('an error event needs a string "message".')
    return ProtocolError(code, message, event.get("data"))


def _check_question(question: dict[str, Any]) -> None:
    method, params = question["method"], question["params"]
    if method == "elicitation/create":
        if params.get("mode", "form") != "form":
            raise _Malformed("only a form (elicitation in form mode) can be asked.")
        if not isinstance(params.get("message"), str):
            raise _Malformed('an elicitation needs a string "message".')
        problems = form.fields_problems(params.get("requestedSchema"))
        if problems:
            raise _Malformed(f"its requestedSchema: {' '.join(problems)}")
    elif method == "sampling/createMessage":
        max_tokens = params.get("maxTokens")
        if not isinstance(params.get("messages"), list) or not isinstance(max_tokens, int):
            raise _Malformed('sampling needs a list "messages" and an integer "maxTokens".')
    elif method != "roots/list":
        raise _Malformed(
            "the request's method must be elicitation/create, sampling/createMessage or roots/list."
        )


async def _asked(ctx: RequestContext, questions: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The client's answers by key, asked together under the event's keys (2026-07-28 inputRequests
    keys, AMB-122), through the context (either era, inline or on a worker). A legacy session stops
    at an elicitation not accepted: the questions after it have no answer."""
    requests = {}
    for key, question in questions.items():
        params = question["params"]
        if question["method"] == "elicitation/create":
            params = {
                "mode": "form",
                "message": params["message"],
                "requestedSchema": params["requestedSchema"],
            }
        elif question["method"] == "sampling/createMessage":
            params = {**params, "messages": params["messages"], "maxTokens": params["maxTokens"]}
        else:
            params = {}
        requests[key] = {"method": question["method"], "params": params}
    answers = await ctx.ask_together(requests)
    for key, request in requests.items():
        answer = answers.get(key)
        if answer is None and len(answers) < len(requests) and _declined(answers):
            continue  # not asked: an earlier form was declined (legacy, one after another)
        if not isinstance(answer, dict):
            raise ToolError(f"The client gave no answer to the endpoint's question {key!r}.")
        if request["method"] == "elicitation/create" and answer.get("action") == "accept":
            form.checked_answers(request["params"]["requestedSchema"], answer)  # only what fits (AMB-120)
    return {key: answer for key, answer in answers.items() if key in requests}


def _declined(answers: dict[str, Any]) -> bool:
    return any(isinstance(a, dict) and a.get("action") in ("decline", "cancel") for a in answers.values())


def _reply_url(value: Any, url: str) -> str:
    """The absolute reply URL; it must be on the tool URL's origin, where its secret headers may go."""
    if not isinstance(value, str) or not value:
        raise _Malformed('an ask event needs a "reply_url".')
    resolved = urljoin(url, value)
    try:
        same = ssrf.split_url(resolved) == ssrf.split_url(url)
    except ToolError:
        same = False
    if not same:
        raise _Malformed('"reply_url" must be on the endpoint\'s own origin (scheme, host and port).')
    return resolved
