"""tools/list and tools/call (TL-01..13)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.background import relay as background
from mcp_app.core import ui_apps
from mcp_app.core.context import RelayingEmit, RequestContext, resources_of
from mcp_app.core.errors import (
    AskOutcome,
    GoAsync,
    InputRequired,
    MissingCapability,
    ProtocolError,
    error_result,
)
from mcp_app.core.mcp_headers import check_param_headers
from mcp_app.core.types import Catalog, ToolDef
from mcp_app.core.versions import is_modern
from mcp_app.governance import answers, audit, decision, guardrails
from mcp_app.handlers import registry
from mcp_app.protocol import (
    approval,
    asking,
    discovery,
    quotas,
    ratelimit,
    result_cache,
    schemas,
    shaping,
    tasks,
)
from mcp_app.protocol.jsonrpc import HeaderMismatch, InvalidParams, JsonRpcError, truncate
from mcp_app.protocol.pagination import paginate, with_cursor

logger = logging.getLogger(__name__)


def describe(tool: ToolDef) -> dict[str, Any]:
    """The newest-revision Tool object; shaping cuts it down per revision."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
        "icons": tool.icons,
        "_meta": tool.meta,
        # 2025-11-25 only (shaping drops it elsewhere); "forbidden" is also what its absence means.
        "execution": {"taskSupport": tool.task_support},
    }


async def offered(ctx: RequestContext, catalog: Catalog) -> tuple[ToolDef, ...]:
    """The tools this request's client can be offered: a legacy client never sees a 2026-only shape,
    and a client without MCP Apps never sees a tool only an app calls (AMB-273)."""
    apps = ui_apps.client_supports(ctx.client_capabilities)
    if catalog.offered_to_all:  # no pass over 10,000 tools per request to find that nothing is left out
        found = catalog.tools
    else:
        found = tuple(tool for tool in catalog.tools if is_offered(ctx, tool, apps))
        found = catalog.tools if len(found) == len(catalog.tools) else found
    # Then what the one decision keeps from this caller (governance/decision.py), once per caller and version.
    return await decision.shown(ctx, catalog, found, (apps, is_modern(ctx.protocol_version)))


def is_offered(ctx: RequestContext, tool: ToolDef, apps: bool | None = None) -> bool:
    if not (tool.legacy or is_modern(ctx.protocol_version)):
        return False
    if apps is None:
        apps = ui_apps.client_supports(ctx.client_capabilities)
    # The extension: "Host MUST NOT include tools in the agent's tool list when their visibility
    # does not include "model"". A client that declared no support has no app: its list is the model's.
    return apps or not tool.app_only


async def handle_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    # Search mode (AMB-376): the same three tools for every caller, whatever the catalog's size.
    listed = discovery.listed(ctx) if discovery.searching(ctx, catalog) else await offered(ctx, catalog)
    page, next_cursor = paginate(ctx, params, "tools", listed, lambda t: t.name)
    tools = [shaping.tool(describe(t), ctx.protocol_version) for t in page]
    return with_cursor({"tools": tools}, next_cursor)


def _check_arguments(tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """Return an isError result when the arguments fail the input schema (AMB-16), else None."""
    try:
        problems = schemas.errors(tool.input_schema, arguments)
    except schemas.InvalidSchema:
        logger.error("tool %s (id %s) has an invalid input schema", tool.name, tool.id)
        return error_result(
            f"Tool {tool.name!r} is misconfigured: its input schema is not a valid JSON Schema."
        )
    if not problems:
        return None
    return error_result(
        f"Invalid arguments for tool {tool.name!r}: "
        + "; ".join(problems)
        + ". Fix the arguments and call again."
    )


def with_defaults(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with the `default` of each top-level property the caller left out.

    A schema that advertises a default promises it to the caller, whatever the handler kind; applied
    after validation, so a default never hides a missing required argument.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return arguments
    missing = {
        name: copy.deepcopy(spec["default"])
        for name, spec in properties.items()
        if name not in arguments and isinstance(spec, dict) and "default" in spec
    }
    return {**arguments, **missing} if missing else arguments


def _finish_result(tool: ToolDef, result: dict[str, Any]) -> dict[str, Any]:
    """Check structuredContent against outputSchema, and mirror it as text (TL-08/09).

    The result's shape (a content list) was checked once, where every handler's result comes out:
    handlers.registry.run_inline, in this process or on the worker (whose result the relay checks).
    """
    # structuredContent is an object before 2026-07-28 and any JSON value since; only a tool whose
    # output schema is not object-rooted (served to 2026-07-28 clients alone) may return another.
    result = dict(result)
    structured = result.get("structuredContent")
    if structured is not None and not isinstance(structured, dict) and tool.legacy:
        logger.error("tool %s returned non-object structuredContent", tool.name)
        return error_result(f"Tool {tool.name!r} returned structured output that is not a JSON object.")
    if tool.output_schema and not result.get("isError"):
        # AMB-15: an output that breaks the declared schema becomes an isError result (the client
        # would reject it anyway); isError results need no structuredContent.
        if structured is None:
            return error_result(
                f"Tool {tool.name!r} declares an output schema but returned no structured output."
            )
        try:
            problems = schemas.errors(tool.output_schema, structured)
        except schemas.InvalidSchema:
            logger.error("tool %s (id %s) has an invalid output schema", tool.name, tool.id)
            return error_result(
                f"Tool {tool.name!r} is misconfigured: its output schema is not a valid JSON Schema."
            )
        if problems:
            # The owner's to mend (a handler or an upstream that changed its output without saying so).
            logger.warning(
                "tool %s (id %s) broke its output schema: %s", tool.name, tool.id, "; ".join(problems)
            )
            return error_result(
                f"Tool {tool.name!r} produced output that does not match its output schema: "
                + "; ".join(problems)
            )
    elif tool.output_schema and structured is not None:
        try:
            if schemas.errors(tool.output_schema, structured):
                del result["structuredContent"]  # an error result never carries non-conforming output
        except schemas.InvalidSchema:
            del result["structuredContent"]
    if result.get("structuredContent") is not None and not result["content"]:
        # TL-09: mirror the structured output as text for clients that only read content.
        result["content"] = [
            {"type": "text", "text": json.dumps(result["structuredContent"], ensure_ascii=False)}
        ]
    return result


async def execute(
    ctx: RequestContext,
    catalog: Catalog,
    tool: ToolDef,
    arguments: dict[str, Any],
    in_background: bool,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Run a tool, inline or on a worker, and check what it returned: the one path of a direct call and
    of a task's (the admin's Try is a direct call). Tool faults come back as isError results;
    InputRequired and MissingCapability (the client must answer first), GoAsync (the call becomes a
    task, AMB-286) and a handler's ProtocolError (AMB-285) propagate.

    `ctx.ask` carries the call's questions either way: the worker's come back here and are asked as an
    inline handler's would be. `job_id` names the ToolRun row a task made already. What comes back
    passes the tenant's guardrails on results (AMB-354), here for a direct call, a task and Try, on the
    worker for a background run (its record holds the guarded result too).
    """
    # The client's answers to what the tool asks pass the guardrails on arguments (AMB-354). A copy of
    # the context only when there are such guardrails.
    asker = answers.guarded_asker(ctx, catalog, tool.name)
    if asker is not ctx.ask:
        ctx = ctx.but(ask=asker)
    try:
        if in_background:
            raw = await background.run(ctx, tool, arguments, ctx.ask, job_id=job_id)
        else:
            raw = await registry.run_inline(ctx, tool, arguments)
    except (AskOutcome, ProtocolError):
        raise
    except Exception:
        # Both paths turn tool faults into isError results; anything escaping them is ours.
        logger.exception("tool %s failed outside its handler", tool.name)
        return error_result(f"Tool {tool.name!r} failed with an internal error.")
    if in_background:
        return _finish_result(tool, raw)  # its guardrails ran on the worker, before its run was recorded
    guarded = await guardrails.scan(
        ctx, "tools/call", catalog, tool.name, _finish_result(tool, raw), "result", "tool"
    )
    return error_result(guarded.blocked.message()) if guarded.blocked is not None else guarded.value


async def follow_background(
    job: dict[str, Any], emit: RelayingEmit, cancelled: asyncio.Event, relayed_until: str
) -> dict[str, Any]:
    """The CallToolResult of a background call whose relay this process took over from a lost one
    (AMB-369, streams/takeover.py): the rest of its run relayed from here, then checked and shaped as
    `handle_call` would have. A handler's protocol error is raised as its JSON-RPC error."""
    tenant = await catalogs.get_tenant(job["tenant_slug"])
    catalog = (
        await catalogs.get_catalog(tenant.id)
        if tenant is not None and tenant.id == job["tenant_id"]
        else None
    )
    tool = catalog.tools_by_name.get(job["tool_name"]) if catalog is not None else None
    if tenant is None or tool is None or tool.id != job["tool_id"]:
        # Its tenant or tool went while it ran: the run is not the caller's to hear about any more.
        result = error_result(f"Tool {job['tool_name']!r} was removed or disabled while it ran.")
        return shaping.call_tool_result(result, job["protocol_version"])
    try:
        raw = await background.follow(job, tenant, tool, emit, cancelled, relayed_until)
    except ProtocolError as exc:
        raise protocol_error(exc) from None
    return shaping.call_tool_result(_finish_result(tool, raw), job["protocol_version"])


def protocol_error(exc: ProtocolError) -> JsonRpcError:
    """A handler's protocol-level failure as the JSON-RPC error the call answers (AMB-285)."""
    error = JsonRpcError(truncate(exc.message, 500), exc.data)
    error.code = exc.code
    return error


def _task_run(catalog: Catalog, tool: ToolDef, arguments: dict[str, Any], in_background: bool) -> tasks.Run:
    """The call's run for a task: `execute`, given the task's context and row. A handler's protocol
    error is raised as its JSON-RPC error: the task ends `failed` with it (AMB-285)."""

    async def run(ctx: RequestContext, job_id: str) -> dict[str, Any]:
        try:
            result = await execute(ctx, catalog, tool, arguments, in_background, job_id)
        except AskOutcome:  # never raised by a task's askers (task_input.py)
            result = error_result(f"Tool {tool.name!r} asked the client in a way a task cannot carry.")
        except ProtocolError as exc:
            raise protocol_error(exc) from None
        return shaping.call_tool_result(result, ctx.protocol_version)

    return run


def asks_before_task(ctx: RequestContext, tool: ToolDef) -> bool:
    """Whether this call's task waits for the handler's questions (AMB-286): a 2026-07-28 call of a tool
    whose configuration says `asks_before_task` runs in the request, asking in rounds, until the
    handler says `as_task`; the rounds' answers go to the task, which runs it again."""
    return is_modern(ctx.protocol_version) and tool.handler_config.get("asks_before_task") is True


async def handle_call(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Validate, run with the tool's timeout, and check the result; tool faults become isError results."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams('tools/call needs "name" (a string).')
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParams('"arguments" must be a JSON object.')
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    meta = discovery.BY_NAME.get(name)
    if meta is not None and discovery.searching(ctx, catalog):
        # search_tools, browse_tools or call_tool (AMB-376); a tenant's own tool of such a name is
        # reached through call_tool, or in full mode.
        if (problem := _check_arguments(meta, arguments)) is not None:
            return shaping.call_tool_result(problem, ctx.protocol_version)
        if meta.name == discovery.CALL:
            params = discovery.unwrap(params, arguments)
            return await _call(ctx, catalog, params, params["name"], params["arguments"], mirrored=False)
        ratelimit.check_tool_call(ctx)
        arguments = with_defaults(meta.input_schema, arguments)
        found = await discovery.answer(ctx, catalog, meta.name, arguments, offered, describe)
        return shaping.call_tool_result(found, ctx.protocol_version)
    return await _call(ctx, catalog, params, name, arguments)


async def _call(
    ctx: RequestContext,
    catalog: Catalog,
    params: dict[str, Any],
    name: str,
    arguments: dict[str, Any],
    mirrored: bool = True,
) -> dict[str, Any]:
    """tools/call of the tool `name`: the params' own, or the one call_tool names (not `mirrored`: its
    arguments are inside call_tool's, which the request's Mcp-Param-* headers could not mirror)."""
    draft = ctx.draft_tool
    tool = draft if draft is not None and draft.name == name else catalog.tools_by_name.get(name)
    if tool is None or not is_offered(ctx, tool) or decision.hidden(ctx, catalog, tool, "tools/call"):
        raise InvalidParams(truncate(f"Unknown tool: {name}", 200))
    if mirrored and tool.mirrors_headers and ctx.param_headers is not None:
        # 2026-07-28: the Mcp-Param-* headers mirror the arguments (x-mcp-header); an intermediary may
        # have routed on them. An unknown tool was answered above, as any missing tool.
        problem = check_param_headers(
            tool.input_schema, arguments, ctx.param_headers.headers, ctx.param_headers.duplicated
        )
        if problem is not None:
            raise HeaderMismatch(truncate(f"Header mismatch: {problem}.", 300))
    if (refused := registry.refused_arguments(tool, arguments)) is not None:
        # A published upstream tool takes exactly what its definition declares (AMB-280): answered as
        # a request the tool cannot take, like an unknown tool, before it costs a call.
        names, why = refused
        raise InvalidParams(truncate(why, 500), data={"arguments": [truncate(n, 100) for n in names[:20]]})
    ratelimit.check_tool_call(ctx)
    in_background = background.runs_in_background(tool)  # decided once: every step below follows it
    as_task = tasks.wanted(ctx, tool, params)
    result = _check_arguments(tool, arguments)
    if result is not None:
        return shaping.call_tool_result(result, ctx.protocol_version)
    # The one decision (governance/decision.py), on arguments that passed the tool's schema: a denial
    # that depends on them names its policy (one that does not was answered above, as a missing tool).
    if (denial := decision.check(ctx, catalog, tool, arguments, "tools/call")) is not None:
        return shaping.call_tool_result(error_result(denial.message("tool", name)), ctx.protocol_version)
    # The guardrails on arguments (AMB-354): a block answers naming the guardrail and spends no quota;
    # what a redacting one leaves is what the tool receives.
    guarded = await guardrails.scan(ctx, "tools/call", catalog, name, arguments, "arguments", "arguments")
    if guarded.blocked is not None:
        return shaping.call_tool_result(error_result(guarded.blocked.message()), ctx.protocol_version)
    arguments = guarded.value
    # Quotas count calls that will run: a malformed, denied or blocked one spent none (AMB-352).
    try:
        await quotas.check(ctx, name, catalog.quotas)
    except quotas.QuotaReached as reached:
        audit.record(
            ctx, "throttled", reached.quota, name, "tools/call", {"retry_after": reached.retry_after}
        )
        return shaping.call_tool_result(error_result(reached.message), ctx.protocol_version)
    if in_background:
        await quotas.check_background_runs(ctx)
    arguments = with_defaults(tool.input_schema, arguments)
    # A retried 2026-07-28 call brings the answers to the questions its handler asked (MRTR).
    rounds = (
        asking.rounds_of(ctx, "tools/call", name, arguments, params)
        if is_modern(ctx.protocol_version)
        else None
    )
    ctx = ctx.but(resources=resources_of(catalog.resources_by_uri))
    try:
        refusal = await approval.check(ctx, tool, arguments, rounds)
        if refusal is not None:
            return shaping.call_tool_result(refusal, ctx.protocol_version)
        answered = None
        if as_task and asks_before_task(ctx, tool):
            assert rounds is not None
            rounds.before_task = True
            try:
                result = await execute(
                    asking.asking_context(ctx, rounds), catalog, tool, arguments, in_background
                )
            except GoAsync:
                answered = rounds
            else:  # it finished without saying `as_task`: the server chose to answer at once
                return shaping.call_tool_result(result, ctx.protocol_version)
        if as_task:
            # Asked (approval, the handler's own questions of AMB-286) before the handle is returned;
            # the run goes on without the request: a task's later questions wait while it is
            # input_required (protocol/task_input.py).
            run = _task_run(catalog, tool, arguments, in_background)
            return await tasks.create(ctx, tool, params, run, in_background, answered)
        # A kept result of this caller's same call (AMB-374); never for a retried 2026-07-28 call, whose
        # answers are not part of the key.
        keep = result_cache.applies(ctx, tool) and not in_background and not asking.is_retry(params)
        if keep and (kept := await result_cache.get(ctx, catalog, tool, arguments)) is not None:
            return shaping.call_tool_result(kept, ctx.protocol_version)
        result = await execute(asking.asking_context(ctx, rounds), catalog, tool, arguments, in_background)
        if keep:
            await result_cache.put(ctx, catalog, tool, arguments, result)
    except InputRequired as asked:
        assert rounds is not None
        return asking.input_required(ctx, "tools/call", name, arguments, rounds, asked)
    except MissingCapability as missing:
        raise asking.missing_capability(missing) from None
    except ProtocolError as exc:
        raise protocol_error(exc) from None
    except Exception:
        # approval and tasks.create are ours too: a fault there is an internal error, never a 500.
        logger.exception("tool %s failed outside its handler", tool.name)
        result = error_result(f"Tool {tool.name!r} failed with an internal error.")
    return shaping.call_tool_result(result, ctx.protocol_version)
