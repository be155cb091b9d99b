"""Talk to an upstream MCP server with the official SDK client: `discover` what it offers, `call_tool`,
`get_prompt`, `read_resource` and `complete`.

Every exchange goes through the pool (a legacy upstream's session is reused; a 2026-07-28 upstream
has none, its client and HTTP connections are kept), the breaker (an upstream that keeps failing is
not tried for a while) and one error funnel: whatever the SDK or the wire raises leaves here as
`UpstreamError` (the upstream answered, but not with a result) or `UpstreamUnavailable` (it could
not be reached), each with a message that names the upstream's host and never a header value.
The caller's own token is never sent: only `Target.headers`, the upstream's own credentials.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from mcp_app.federation import breaker, call_stats, failures, pool, questions, upstream_tasks
from mcp_app.federation.errors import UpstreamBusy, UpstreamError, UpstreamUnavailable
from mcp_app.federation.questions import Asking, Stopped
from mcp_app.federation.target import SSE, Offering, Target
from mcp_app.federation.transport import CURRENT_CALL, CallState, LogFn

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]

_CALL_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)
# Pages of one list walked at most in `discover`: an upstream whose cursor never ends cannot hang it.
MAX_PAGES = 50


def _wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _attempts(target: Target, state: CallState, body: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``body(client)`` on a pooled connection; once more on a new one if it never reached the upstream.

    "Never reached" is provable in two cases only: no connection could be made for the request, or a
    legacy session the upstream no longer knows was refused (HTTP 404: an upstream restart or expiry).
    Anything else is never repeated, so a tool never runs twice.
    """
    the_pool = pool.current()
    for attempt in (1, 2):
        connection, fresh = await the_pool.acquire(target)
        state.connected = True
        token = CURRENT_CALL.set(state)
        call = (state, questions.CURRENT.get())
        connection.calls.append(call)
        try:
            return await body(connection.client)
        except Stopped:
            raise  # our caller's question ended the call; the upstream call was cancelled
        except Exception as exc:
            if connection.target.transport == SSE and state.too_large is None:
                # An HTTP+SSE reply comes on the session's stream: past the cap, it ended the session.
                state.too_large = connection.keeper_state.too_large
            lost_session = connection.legacy and isinstance(exc, MCPError) and 404 in state.statuses
            never_reached = state.unreached or lost_session
            error = failures.failure(target, state, exc)
            # A reply abandoned at its bound (too large, flooded) keeps the connection: on Streamable HTTP
            # it was one HTTP response of it (transport.ReplyAbandoned); on HTTP+SSE it was the session's
            # stream, whose end has discarded the connection already.
            if never_reached or isinstance(error, UpstreamUnavailable):
                the_pool.discard(connection)
            if never_reached and attempt == 1 and not fresh:
                state.statuses.clear()
                state.unreached = False
                continue
            raise error from None
        except asyncio.CancelledError:
            # A 2026-07-28 call is cancelled by dropping its HTTP exchange; httpx may then hand that
            # connection out again half-closed. A new client is one discover away: the next call
            # takes one, while the calls still on this one (other callers of the key) finish.
            if not connection.legacy:
                the_pool.retire(connection)
            raise
        finally:
            connection.calls.remove(call)
            CURRENT_CALL.reset(token)
            the_pool.release(connection)
    raise AssertionError("unreachable")


async def _exchange(
    target: Target, state: CallState, body: Callable[[Any], Awaitable[Any]], what: str
) -> Any:
    """``_attempts`` within the target's deadline and through the breaker, its outcome counted in health."""
    began = time.monotonic()
    failure: str | None = call_stats.UNAVAILABLE  # unless a branch below says otherwise
    reached: bool | None = None
    try:
        probe = breaker.before_call(target)
    except UpstreamUnavailable:
        call_stats.record(target.upstream_key, 0.0, call_stats.UNAVAILABLE)
        raise
    try:
        async with asyncio.timeout(target.timeout_seconds) as deadline:
            state.deadline = deadline
            result = await _attempts(target, state, body)
        reached, failure = True, None
        return result
    except Stopped:
        failure = None  # ended by our caller, as a cancellation: says nothing about the upstream
        raise
    except TimeoutError:
        # Still connecting: the upstream did not take the connection. Otherwise it is slow.
        reached, failure = state.connected, call_stats.TIMEOUT
        seconds = f"{target.timeout_seconds:g}"
        if not reached:
            raise UpstreamUnavailable(
                f"Upstream {target.label} did not accept a connection within {seconds} seconds."
            ) from None
        raise UpstreamError(
            f"Upstream {target.label} did not answer the {what} within {seconds} seconds."
        ) from None
    except UpstreamBusy:
        # Our own bound, not the upstream's failure: the breaker does not count it.
        failure = call_stats.BUSY
        raise
    except UpstreamUnavailable:
        reached = False
        raise
    except UpstreamError:
        reached, failure = True, call_stats.ERROR
        if state.flooded is not None:
            # A flood costs this process the parsing of every message: no call goes to that upstream
            # for the breaker's pause, then one probes it (AMB-188). Not "reached", or it would close.
            breaker.trip(target)
            reached = None
        raise
    except asyncio.CancelledError:
        failure = None  # the caller gave up: says nothing about the upstream
        raise
    finally:
        breaker.settle(target, reached, probe)
        if reached is not None or failure is not None:
            call_stats.record(target.upstream_key, time.monotonic() - began, failure)


async def call_tool(
    target: Target,
    name: str,
    arguments: dict[str, Any],
    *,
    on_progress: ProgressFn | None = None,
    on_log: LogFn | None = None,
    asking: Asking | None = None,
    as_task: bool = False,
) -> dict[str, Any]:
    """Call tool ``name`` upstream; return its CallToolResult as a wire dict (content, structuredContent, ...).

    Progress and log notifications reach ``on_progress`` / ``on_log`` while the call runs; cancelling
    the awaiting task cancels the upstream call. The upstream's questions go to ``asking``
    (federation/questions.py); what its `ask` raises, call_tool raises. ``as_task``: the upstream runs
    the tool as a task (its definition says required), followed to its result (federation/upstream_tasks.py);
    a 2026-07-28 upstream that refuses a plain call for want of tasks gets one too. Raises
    UpstreamError / UpstreamUnavailable.
    """
    resume = asking.resume if asking is not None else None
    number, answers, request_state = 0, None, None
    if resume is not None and asking is not None:
        number, request_state = resume.number, resume.request_state
        answers = await questions.responses(asking, resume)
    while True:
        try:
            result = await _call_once(
                target, name, arguments, on_progress, on_log, asking, answers, request_state, as_task
            )
        except UpstreamError as exc:
            if resume is None or exc.code is None or number != resume.number:
                raise
            # The upstream refused the state we kept (expired, or its key changed with a restart)
            # before running anything: start from its first round; our caller still has the answers.
            resume, number, answers, request_state = None, 0, None, None
            continue
        if not isinstance(result, types.InputRequiredResult):
            return _wire(result)
        if asking is None:
            raise UpstreamError(
                f"Upstream {target.label} asked for input, and this call has no client to ask."
            )
        if number >= questions.MAX_ROUNDS:
            raise UpstreamError(
                f"Upstream {target.label} asked for input more than {questions.MAX_ROUNDS} times; "
                "the call was abandoned."
            )
        number += 1
        round_ = questions.round_of(number, result)
        if asking.remember is not None:
            asking.remember(round_)
        answers = await questions.responses(asking, round_)
        request_state = round_.request_state


async def _call_once(
    target: Target,
    name: str,
    arguments: dict[str, Any],
    on_progress: ProgressFn | None,
    on_log: LogFn | None,
    asking: Asking | None,
    answers: dict[str, Any] | None,
    request_state: str | None,
    as_task: bool = False,
) -> types.CallToolResult | types.InputRequiredResult:
    """One tools/call exchange (one round on 2026-07-28), the questions of a legacy upstream bridged."""
    state = CallState(on_log=on_log)
    bridge = questions.Bridge(asking)

    async def body(client: Any) -> types.CallToolResult | types.InputRequiredResult:
        # 2026-07-28 sends log messages only to a request that opts in: a call with someone to tell does.
        wants_logs = on_log is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS
        meta: dict[str, Any] | None = {types.LOG_LEVEL_META_KEY: "debug"} if wants_logs else None

        def as_a_task() -> Awaitable[types.CallToolResult]:
            call = upstream_tasks.call(client.session, name, arguments, meta, on_progress, target.label)
            return questions.send(bridge, call)

        if as_task:
            return await as_a_task()
        params = types.CallToolRequestParams(
            # RequestParamsMeta is an open TypedDict (extra_items=Any): any {key: value} is one.
            name=name,
            arguments=arguments,
            _meta=cast("types.RequestParamsMeta | None", meta),
            input_responses=answers,
            request_state=request_state,
        )
        request = types.CallToolRequest(params=params)

        def sent() -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
            # The session's own call_tool would validate against the upstream's live output schema; the
            # pinned one is ours to check, so the request goes out as is.
            return questions.send(
                bridge, client.session.send_request(request, _CALL_RESULT, progress_callback=on_progress)
            )

        try:
            return await sent()
        except MCPError as exc:
            if upstream_tasks.refused_for_want_of_tasks(exc, client):
                # The tool runs only as a task, which its pinned listing did not say (2026-07-28 has no
                # execution.taskSupport, or it changed since); refused before it ran: again as one (AMB-199).
                bridge.over.clear()
                return await as_a_task()
            if exc.code != types.HEADER_MISMATCH or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                raise
            # A 2026-07-28 upstream wants some arguments mirrored into Mcp-Param-* headers, which the
            # SDK learns from the tool's listing. The request was refused before it ran: list, send again.
            await _walk(lambda c: client.session.list_tools(params=_page(c)), "tools")
            bridge.over.clear()
            return await sent()

    token = questions.CURRENT.set(bridge)
    try:
        return await _exchange(target, state, body, "call")
    except Stopped as stopped:
        raise stopped.cause from None
    finally:
        questions.CURRENT.reset(token)


async def _request(target: Target, request: Any, result_type: Any, what: str) -> dict[str, Any]:
    """One request of ``result_type`` upstream (a prompt, a read, a completion), its result as a wire dict.

    Through ``_exchange``, so the pool, the breaker, the deadline and the health count it as a call.
    An upstream that asks our client something meanwhile is told no one can answer (questions.py).
    """
    state = CallState()

    async def body(client: Any) -> Any:
        return await client.session.send_request(request, result_type)

    return _wire(await _exchange(target, state, body, what))


async def get_prompt(target: Target, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    """prompts/get of ``name`` upstream: its GetPromptResult (description, messages) as a wire dict."""
    params = types.GetPromptRequestParams(name=name, arguments=arguments or None)
    return await _request(target, types.GetPromptRequest(params=params), types.GetPromptResult, "prompt")


async def read_resource(target: Target, uri: str) -> dict[str, Any]:
    """resources/read of ``uri`` upstream: its ReadResourceResult (contents) as a wire dict."""
    params = types.ReadResourceRequestParams(uri=uri)
    return await _request(target, types.ReadResourceRequest(params=params), types.ReadResourceResult, "read")


async def complete(
    target: Target, ref: dict[str, Any], argument: dict[str, str], context: dict[str, str] | None
) -> dict[str, Any]:
    """completion/complete upstream for a prompt's argument or a template's variable (``ref`` as on the wire)."""
    params = types.CompleteRequestParams.model_validate(
        {"ref": ref, "argument": argument, **({"context": {"arguments": context}} if context else {})}
    )
    request = types.CompleteRequest(params=params)
    return await _request(target, request, types.CompleteResult, "completion")


def _page(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor else None


async def _walk(list_page: Callable[[str | None], Awaitable[Any]], attr: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await list_page(cursor)
        items += [_wire(item) for item in getattr(page, attr)]
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def discover(target: Target) -> Offering:
    """What the upstream offers now: its era, identity, capabilities and every list (all pages)."""
    state = CallState()

    async def body(client: Any) -> Offering:
        session = client.session
        capabilities = client.server_capabilities
        info = client.server_info

        async def lst(
            method: Callable[..., Awaitable[Any]], attr: str, present: Any, optional: bool = True
        ) -> list[dict[str, Any]]:
            if present is None:
                return []
            seen = len(state.statuses)
            try:
                return await _walk(lambda c: method(params=_page(c)), attr)
            except Exception:
                # Credentials that do not cover a kind (HTTP 403, insufficient_scope: a token with the
                # tools scope alone) leave that kind out; the tools themselves must be listable.
                if not optional or 403 not in state.statuses[seen:]:
                    raise
                del state.statuses[seen:]
                return []

        tools = await lst(session.list_tools, "tools", capabilities.tools, optional=False)
        prompts = await lst(session.list_prompts, "prompts", capabilities.prompts)
        resources = await lst(session.list_resources, "resources", capabilities.resources)
        templates = await lst(session.list_resource_templates, "resource_templates", capabilities.resources)
        return Offering(
            protocol_version=client.protocol_version,
            server_info=_wire(info) if info is not None else {},
            capabilities=_wire(capabilities),
            instructions=_instructions(session),
            tools=tools,
            prompts=prompts,
            resources=resources,
            resource_templates=templates,
        )

    return await _exchange(target, state, body, "request")


def _instructions(session: Any) -> str:
    """The server's instructions, from its initialize or discover result."""
    for result in (getattr(session, "initialize_result", None), getattr(session, "discover_result", None)):
        text = getattr(result, "instructions", None)
        if text:
            return text
    return ""
