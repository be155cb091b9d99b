"""A handler asks the client (elicitation, sampling, roots) without knowing the era.

Longer than 400 lines: both eras' ways of asking share the checks, the names and the groups of questions.

The handler awaits `ctx.elicit(...)`, `ctx.sample(...)` or `ctx.list_roots()`; the asker set here
decides how the question travels:

- 2026-07-28 (multi round-trip requests, basic/patterns/mrtr): the handler runs from its start on
  every round and its questions are numbered in the order it asks them. A question whose answer
  the request brings is answered at once; the first one without raises InputRequired, and the call
  returns an InputRequiredResult naming it, with a `requestState` that carries the answers so far.
  That state is signed (SECRET_KEY), expires after MCP_ASK_STATE_SECONDS and is bound to the tenant,
  the method, the tool and its arguments, and the caller: tampered, expired or foreign state is an
  error, never a run. So a handler must ask before it changes anything: what precedes an ask runs
  once per round. What the handler puts in `ctx.carried` rides in the same state to its next run (an
  upstream tool keeps its upstream's round there).
- Legacy sessions: a server-to-client JSON-RPC request on the call's own SSE stream; the client's
  response arrives as a separate POST, on this process (a future here) or another one (through a
  Redis key this process polls), until MCP_ASK_TIMEOUT_SECONDS.

A client that did not declare the capability is never asked: 2026-07-28 answers -32021 with the
capability it needs; a legacy call becomes an isError result that says so.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core import signing

from mcp_app.core.context import AS_TASK, ASK_TOGETHER, RequestContext
from mcp_app.core.errors import GoAsync, InputRequired, MissingCapability, ToolError
from mcp_app.core.versions import V2025_06_18, V2025_11_25, is_modern
from mcp_app.infra import redis_client
from mcp_app.protocol import capability_words
from mcp_app.protocol.jsonrpc import InvalidParams, MissingRequiredClientCapability

logger = logging.getLogger(__name__)

# The capability each question needs, and the first legacy revision that has it.
CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
SINCE = {"elicitation/create": V2025_06_18}
STATE_SALT = "mcp.mrtr.state"
POLL_SECONDS = 0.2


def _is_url_mode(request: dict[str, Any]) -> bool:
    return request["method"] == "elicitation/create" and request.get("params", {}).get("mode") == "url"


def _needs(ctx: RequestContext, request: dict[str, Any]) -> str | None:
    """The capability the client lacks for `request` ("elicitation.url": a sub-capability), or None."""
    capability = CAPABILITY[request["method"]]
    declared = ctx.client_capabilities.get(capability)
    if not isinstance(declared, dict):
        return capability
    if _is_url_mode(request) and not isinstance(declared.get("url"), dict):
        return f"{capability}.url"  # elicitation: {} alone means form mode only
    return None


def can_ask(ctx: RequestContext, method: str) -> bool:
    """Whether this request's client may be asked `method` (declared it, on a revision that has it)."""
    if _needs(ctx, {"method": method}) is not None:
        return False
    if is_modern(ctx.protocol_version):
        return True
    return ctx.session is not None and ctx.protocol_version >= SINCE.get(method, "")


def _since(request: dict[str, Any]) -> str:
    """The first legacy revision that has this question (URL-mode elicitation: 2025-11-25)."""
    return V2025_11_25 if _is_url_mode(request) else SINCE.get(request["method"], "")


# --- 2026-07-28: multi round-trip requests ---------------------------------------------------------


# The server's own question names (approval.py); a handler's question never takes one of them.
RESERVED_KEYS = frozenset({"approval"})
MAX_KEY_CHARS = 64


class KeyNames:
    """Unique question names within one run (AMB-122): a definition's name, cut to MAX_KEY_CHARS,
    gets `#2`, `#3` … when reserved or already used. A handler asks in the same order every round, so
    a question keeps its name from round to round."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def claim(self, name: str) -> str:
        base = name[:MAX_KEY_CHARS] or "q"
        key, n = base, 1
        while key in self.used or key in RESERVED_KEYS:
            n += 1
            key = f"{base}#{n}"
        self.used.add(key)
        return key


def group_of(request: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The named requests of an ASK_TOGETHER question, or None for a single question."""
    if request.get("method") != ASK_TOGETHER:
        return None
    requests = (request.get("params") or {}).get("requests")
    if not isinstance(requests, dict) or not all(isinstance(r, dict) for r in requests.values()):
        raise ToolError("A group of questions must name each request.")
    return requests


@dataclass
class Rounds:
    """The answers a modern request brings, and the questions its handler asks this round."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    asked: int = 0
    # The questions this round's inputResponses answered (none on a first call).
    fresh: set[str] = field(default_factory=set)
    # The call's name across its rounds (RequestContext.call_id), kept in the state.
    call_id: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    names: KeyNames = field(default_factory=KeyNames)
    # RequestContext.carried: what the handler keeps for its next run, kept in the state.
    carried: dict[str, Any] = field(default_factory=dict)
    # A call that becomes a task once its handler's questions are asked (AMB-286): `ctx.as_task()`
    # ends this run with GoAsync. Elsewhere it is answered at once.
    before_task: bool = False

    def asker(self, ctx: RequestContext) -> Any:
        async def ask(request: dict[str, Any]) -> dict[str, Any]:
            if request.get("method") == AS_TASK:
                if self.before_task:
                    raise GoAsync
                return {}
            group = group_of(request)
            if group is not None:
                return {"results": self.ask_together(ctx, group)}
            self.asked += 1
            return self.ask_as(ctx, self.names.claim(f"q{self.asked}"), request)

        return ask

    def ask_together(self, ctx: RequestContext, group: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The answers to every question of the group, or InputRequired naming all unanswered ones."""
        results: dict[str, Any] = {}
        waiting: dict[str, dict[str, Any]] = {}
        for name, request in group.items():
            key = self.names.claim(str(name))
            try:
                results[name] = self.ask_as(ctx, key, request)
            except InputRequired as asked:
                waiting.update(asked.requests)
        if waiting:
            raise InputRequired(waiting)
        return results

    def ask_as(self, ctx: RequestContext, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """The answer to the question named `key`, or InputRequired naming it.

        Named questions (the server's own, such as an approval) stay apart from a handler's, wherever
        the handler runs.
        """
        self.names.used.add(key)
        missing = _needs(ctx, request)
        if missing is not None:
            raise MissingCapability(missing)
        if key in self.answers:
            return self.answers[key]
        if _is_url_mode(request):  # 2026-07-28's URL mode has no elicitationId: the state names the call
            params = {k: v for k, v in request["params"].items() if k != "elicitationId"}
            request = {**request, "params": params}
        raise InputRequired({key: request})


def _binding(ctx: RequestContext, method: str, name: str, arguments: dict[str, Any]) -> str:
    """What a state is valid for: this tenant, method, definition, arguments and caller (subject: AMB-204)."""
    salient = [ctx.tenant.id, method, name, arguments, ctx.user_id, ctx.client_id, *filter(None, [ctx.subject])]
    return hashlib.sha256(json.dumps(salient, sort_keys=True, default=str).encode()).hexdigest()


def is_retry(params: dict[str, Any]) -> bool:
    """Whether a request retries an earlier round (mrtr): it brings answers or the state of one."""
    return "requestState" in params or "inputResponses" in params


def rounds_of(
    ctx: RequestContext, method: str, name: str, arguments: dict[str, Any], params: dict[str, Any]
) -> Rounds:
    """The answers of a retried request: its signed state's, plus the inputResponses to its last question."""
    state = params.get("requestState")
    responses = params.get("inputResponses")
    if responses is not None and not isinstance(responses, dict):
        raise InvalidParams('"inputResponses" must be an object of answers.')
    if state is None:
        return Rounds()
    if not isinstance(state, str) or len(state) > 64_000:
        raise InvalidParams("Invalid requestState: call again without it.")
    try:
        payload = signing.loads(state, salt=STATE_SALT, max_age=settings.MCP_ASK_STATE_SECONDS)
    except signing.SignatureExpired:
        raise InvalidParams("The requestState has expired: call again without it.") from None
    except signing.BadSignature:
        raise InvalidParams("Invalid requestState: call again without it.") from None
    if not isinstance(payload, dict) or payload.get("b") != _binding(ctx, method, name, arguments):
        raise InvalidParams("This requestState belongs to another request: call again without it.")
    answers = dict(payload.get("a") or {})
    pending = payload.get("p")
    pending = [pending] if isinstance(pending, str) else pending if isinstance(pending, list) else []
    call_id = str(payload.get("c") or secrets.token_urlsafe(16))
    carried = payload.get("k")
    fresh = set()
    for key in pending:
        answer = (responses or {}).get(key)
        if isinstance(key, str) and isinstance(answer, dict):
            answers[key] = answer
            fresh.add(key)
    # An unanswered question is simply asked again (mrtr "Error Handling").
    return Rounds(
        answers, fresh=fresh, call_id=call_id, carried=dict(carried) if isinstance(carried, dict) else {}
    )


def input_required(
    ctx: RequestContext,
    method: str,
    name: str,
    arguments: dict[str, Any],
    rounds: Rounds,
    asked: InputRequired,
) -> dict[str, Any]:
    """The InputRequiredResult of a round: the question, and the state that carries the answers so far."""
    payload = {
        "a": rounds.answers,
        "p": list(asked.requests),
        "b": _binding(ctx, method, name, arguments),
        "c": rounds.call_id,
    }
    if rounds.carried:
        payload["k"] = rounds.carried
    state = signing.dumps(payload, salt=STATE_SALT, compress=True)
    return {"resultType": "input_required", "inputRequests": asked.requests, "requestState": state}


def missing_capability(exc: MissingCapability) -> MissingRequiredClientCapability:
    required: dict[str, Any] = {}
    for part in reversed(exc.capability.split(".")):  # "elicitation.url" -> {"elicitation": {"url": {}}}
        required = {part: required}
    needs, fix = capability_words.plain(exc.capability)
    return MissingRequiredClientCapability(
        f"This needs {needs}, and the request did not declare the client capability {exc.capability!r}. {fix}",
        data={"requiredCapabilities": required},
    )


# --- Legacy sessions: server-to-client requests -------------------------------------------------------

_waiting: dict[tuple[str, str], asyncio.Future] = {}


def _answer_key(session_id: str, request_id: str) -> str:
    return f"mcp:answer:{session_id}:{request_id}"


def _shaped(request: dict[str, Any], version: str) -> dict[str, Any]:
    """The request as the session's revision knows it (elicitation `mode` is 2025-11-25's; AMB-121)."""
    if request["method"] == "elicitation/create" and version < V2025_11_25:
        params = {k: v for k, v in request["params"].items() if k != "mode"}
        if isinstance(params.get("requestedSchema"), dict):
            params["requestedSchema"] = _form_for_2025_06_18(params["requestedSchema"])
        return {**request, "params": params}
    return request


def _form_for_2025_06_18(schema: dict[str, Any]) -> dict[str, Any]:
    """A form in 2025-06-18's shapes: a titled choice as enum + enumNames, defaults only on booleans;
    a multiple choice it cannot carry (its answers are never lists) is refused."""
    properties = {}
    for name, spec in (schema.get("properties") or {}).items():
        if not isinstance(spec, dict):
            properties[name] = spec
            continue
        if spec.get("type") == "array":
            raise ToolError(
                f"This form asks for a multiple choice ({name!r}), which needs a client on protocol "
                "revision 2025-11-25 or later; this session is 2025-06-18."
            )
        spec = dict(spec)
        if spec.get("type") != "boolean":
            spec.pop("default", None)
        titled = spec.pop("oneOf", None)
        if isinstance(titled, list):
            spec["enum"] = [o.get("const") for o in titled if isinstance(o, dict)]
            spec["enumNames"] = [o.get("title") for o in titled if isinstance(o, dict)]
        properties[name] = spec
    return {**schema, "properties": properties}


def session_asker(ctx: RequestContext) -> Any:
    """Ask on the call's own stream and wait for the client's response POST, wherever it lands."""
    # Not a closure naming itself (a group asks through it): a cycle per legacy call (AMB-196).
    return functools.partial(_ask_on_stream, ctx)


async def _ask_on_stream(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("method") == AS_TASK:
        return {}  # a legacy call is a task from its start, or never one
    group = group_of(request)
    if group is not None:
        return {"results": await one_after_another(functools.partial(_ask_on_stream, ctx), group)}
    session = ctx.session
    method = request["method"]
    missing = _needs(ctx, request)
    if session is None or missing is not None or ctx.protocol_version < _since(request):
        old = _since(request) if missing is None and ctx.protocol_version < _since(request) else ""
        raise ToolError(capability_words.refusal(missing or CAPABILITY[method], ctx.protocol_version, old))
    shaped = _shaped(request, ctx.protocol_version)
    request_id = f"ask-{secrets.token_urlsafe(12)}"
    key = (session.id, request_id)
    future: asyncio.Future = asyncio.get_running_loop().create_future()
    _waiting[key] = future
    try:
        await ctx.emit({"jsonrpc": "2.0", "id": request_id, **shaped})
        response = await _wait(session.id, request_id, future)
    finally:
        _waiting.pop(key, None)
    if "error" in response:
        error = response["error"] if isinstance(response["error"], dict) else {}
        raise ToolError(f"The client could not answer ({method}): {error.get('message', 'an error')}.")
    result = response.get("result")
    if not isinstance(result, dict):
        raise ToolError(f"The client's answer to {method} was not a result object.")
    return result


async def one_after_another(
    ask: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]], group: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """A group asked in sequence (legacy, AMB-122), stopping at the first elicitation not accepted:
    the person said no, so the rest is not put to them."""
    results: dict[str, dict[str, Any]] = {}
    for name, request in group.items():
        results[name] = await ask(request)
        if request.get("method") == "elicitation/create" and results[name].get("action") != "accept":
            break
    return results


async def _wait(session_id: str, request_id: str, future: asyncio.Future) -> dict[str, Any]:
    """The response, from this process (the future) or another (its Redis key), within the timeout."""
    limit = settings.MCP_ASK_TIMEOUT_SECONDS
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise ToolError(f"The client did not answer within {limit:g} seconds.")
        try:
            async with asyncio.timeout(min(POLL_SECONDS, remaining)):
                return await asyncio.shield(future)
        except TimeoutError:
            pass
        if redis_client.enabled():
            raw = await redis_client.client().getdel(_answer_key(session_id, request_id))
            if raw is not None:
                return json.loads(raw)


async def deliver(session_id: str, message: dict[str, Any]) -> None:
    """A client's response POST: to the handler waiting here, or left in Redis for the process that is."""
    request_id = message.get("id")
    if not isinstance(request_id, str) or not request_id.startswith("ask-"):
        return  # not an answer to one of our questions
    future = _waiting.get((session_id, request_id))
    if future is not None and not future.done():
        future.set_result(message)
        return
    if redis_client.enabled():
        await redis_client.client().set(
            _answer_key(session_id, request_id),
            json.dumps(message),
            ex=int(settings.MCP_ASK_TIMEOUT_SECONDS) + 60,
        )
    else:
        logger.info("an answer for %s arrived, but nothing here waits for it", request_id)


def asker_for(ctx: RequestContext, rounds: Rounds | None) -> Any:
    """The asker of a handler run: rounds for 2026-07-28, the session's stream for legacy calls."""
    if is_modern(ctx.protocol_version):
        assert rounds is not None
        return rounds.asker(ctx)
    return session_asker(ctx)


def asking_context(ctx: RequestContext, rounds: Rounds | None) -> RequestContext:
    """`ctx` for a handler that may ask: its asker, the call's name across rounds, what it carries."""
    call_id = rounds.call_id if rounds is not None else secrets.token_urlsafe(16)
    carried = rounds.carried if rounds is not None else {}
    return ctx.but(ask=asker_for(ctx, rounds), call_id=call_id, carried=carried)


async def answering(
    ctx: RequestContext,
    method: str,
    name: str,
    arguments: dict[str, Any],
    params: dict[str, Any],
    run: Callable[[RequestContext], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """`run` with a context that can ask, in either era: its result, or the round's InputRequiredResult.

    For methods whose handler runs here from start to end (prompts/get, resources/read); tools/call
    does the same around its approval step and its choice between inline and background.
    """
    rounds = rounds_of(ctx, method, name, arguments, params) if is_modern(ctx.protocol_version) else None
    try:
        return await run(asking_context(ctx, rounds))
    except InputRequired as asked:
        assert rounds is not None
        return input_required(ctx, method, name, arguments, rounds, asked)
    except MissingCapability as missing:
        raise missing_capability(missing) from None
