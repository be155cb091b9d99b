"""The demo's streaming endpoints that ask, fail, and go on as a task: what the `ask_everything`,
`greet_in_a_task` and `fail_on_purpose` demo tools post to (mcp_app/demo/tenants/demo.yaml), so the http
kind's events of AMB-284..286 can be tried end to end without any outside service.

An endpoint that asks streams its question with a reply URL of this module (`/demo/reply/<token>`) and
waits for the answer the platform posts there. The wait is an asyncio future of this process: the
platform posts from the process that reads the stream, to its own public URL, which bin/serve's one
Daphne serves. On 2026-07-28 the platform closes the stream after the question (the round ends) and
calls again with the answer known: the new stream asks again and gets its answer at once.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from lib import nesting

# A public endpoint: at most this many streams wait for an answer at once, each at most ANSWER_SECONDS
# (the demo tools' own timeout: a person takes their time over a form).
MAX_WAITING, ANSWER_SECONDS = 100, 300.0
MAX_REPLY_BYTES = 64 * 1024
TASK_STEPS, TASK_STEP_SECONDS = 3, 0.2

NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Your name", "minLength": 1}},
    "required": ["name"],
}
FAILURE = (
    "The demo endpoint failed on purpose with a protocol-level error (JSON-RPC -32603): a call answers "
    "it as an error, and a task running it ends failed."
)

_waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}


def _line(**event: Any) -> str:
    return json.dumps(event) + "\n"


def _stream(events: AsyncIterator[str]) -> HttpResponseBase:
    return StreamingHttpResponse(events, content_type="application/x-ndjson")


class _Asking:
    """One stream's question: the reply URL to send, then its answer (None when none came in time)."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(16)
        self.future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        _waiting[self.token] = self.future

    @property
    def reply_url(self) -> str:
        return f"/demo/reply/{self.token}"  # relative: on the tool URL's own origin, as the platform wants

    async def answer(self) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(ANSWER_SECONDS):
                return await self.future
        except TimeoutError:
            return None
        finally:
            _waiting.pop(self.token, None)


def _busy() -> HttpResponse | None:
    if len(_waiting) >= MAX_WAITING:
        return JsonResponse({"error": "Too many questions wait for an answer; try again later."}, status=503)
    return None


def _text(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return "(no text)"


def _name(answer: Any) -> str | None:
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return None
    name = (answer.get("content") or {}).get("name")
    return name if isinstance(name, str) else None


async def _ask_together_events(asking: _Asking) -> AsyncIterator[str]:
    greeting = {"role": "user", "content": {"type": "text", "text": "Write a one-line greeting."}}
    requests = {
        "user_name": {
            "method": "elicitation/create",
            "params": {"message": "What is your name?", "requestedSchema": NAME_FORM},
        },
        "greeting": {"method": "sampling/createMessage", "params": {"messages": [greeting], "maxTokens": 50}},
        "client_roots": {"method": "roots/list", "params": {}},
    }
    yield _line(type="ask", requests=requests, reply_url=asking.reply_url)
    reply = await asking.answer()
    results = (reply or {}).get("results")
    if not isinstance(results, dict):
        yield _line(type="result", content=[{"type": "text", "text": "No answers came."}], isError=True)
        return
    name = _name(results.get("user_name"))
    if name is None:
        text = "You did not give your name, so nothing else was asked."
        yield _line(type="result", content=[{"type": "text", "text": text}])
        return
    roots = [
        r.get("uri") for r in (results.get("client_roots") or {}).get("roots") or [] if isinstance(r, dict)
    ]
    said = _text(results.get("greeting"))
    text = f"Hello, {name}! Your model's greeting: {said} Your client shares {len(roots)} root(s): " + (
        ", ".join(str(uri) for uri in roots) or "none"
    )
    structured = {"name": name, "greeting": said, "roots": roots}
    yield _line(type="result", content=[{"type": "text", "text": text}], structuredContent=structured)


@csrf_exempt  # a machine endpoint: no browser session, no cookies, nothing to forge
@require_POST
async def ask_together(request: HttpRequest) -> HttpResponseBase:
    """Ask a name (a form), a greeting (the client's model) and the client's roots in one event (AMB-284),
    then answer with all three."""
    return _busy() or _stream(_ask_together_events(_Asking()))


async def _task_events(asking: _Asking) -> AsyncIterator[str]:
    question = {
        "method": "elicitation/create",
        "params": {"message": "What is your name?", "requestedSchema": NAME_FORM},
    }
    yield _line(type="ask", id="user_name", request=question, reply_url=asking.reply_url)
    reply = await asking.answer()
    name = _name((reply or {}).get("result"))
    if name is None:
        yield _line(type="result", content=[{"type": "text", "text": "No name was given; nothing to do."}])
        return
    # The questions are asked: a 2026-07-28 client that takes tasks gets its task here (AMB-286), and
    # the task calls this endpoint again, its question answered at once.
    yield _line(type="task")
    for step in range(1, TASK_STEPS + 1):
        await asyncio.sleep(TASK_STEP_SECONDS)
        yield _line(type="progress", progress=step, total=TASK_STEPS, message=f"Step {step} of {TASK_STEPS}")
    text = f"Hello, {name}! This greeting took {TASK_STEPS} steps."
    yield _line(type="result", content=[{"type": "text", "text": text}], structuredContent={"name": name})


@csrf_exempt  # a machine endpoint, as ask_together
@require_POST
async def ask_then_task(request: HttpRequest) -> HttpResponseBase:
    """Ask a name, say the questions are done (`{"type": "task"}`), then work a few steps and greet."""
    return _busy() or _stream(_task_events(_Asking()))


async def _failing_events() -> AsyncIterator[str]:
    yield _line(type="progress", progress=1, total=2, message="Starting")
    yield _line(type="error", code=-32603, message=FAILURE)


@csrf_exempt  # a machine endpoint, as ask_together
@require_POST
async def fail(request: HttpRequest) -> HttpResponseBase:
    """Start, then fail at the protocol level (an `error` event, AMB-285)."""
    return _stream(_failing_events())


@csrf_exempt  # the platform posts the answer to a question here
@require_POST
def reply(request: HttpRequest, token: str) -> HttpResponse:
    """The answer to the question of the stream waiting under `token`; 404 when none waits."""
    future = _waiting.get(token)
    if future is None or future.done():
        return JsonResponse({"error": "No question waits under this reply URL."}, status=404)
    if len(request.body) > MAX_REPLY_BYTES:
        return JsonResponse({"error": f"The body is over {MAX_REPLY_BYTES} bytes."}, status=413)
    try:
        answer = nesting.loads(request.body or b"null")
    except ValueError:
        return JsonResponse({"error": "The body is not JSON."}, status=400)
    if not isinstance(answer, dict):
        return JsonResponse({"error": "The body is not a JSON object."}, status=400)
    future.get_loop().call_soon_threadsafe(_settle, future, answer)
    return HttpResponse(status=204)


def _settle(future: asyncio.Future[dict[str, Any]], answer: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(answer)
