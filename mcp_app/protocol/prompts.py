"""prompts/list and prompts/get (PR-01..06).

An argument marked `"ask": true` is one the server can obtain itself: when the client leaves it
out, the person is asked for it (an elicitation form of every such argument left out, in either era:
protocol/asking.py). It is listed as not required, since the client need not send it; a client that
cannot be asked gets the usual -32602 for a required one.
"""

from __future__ import annotations

from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.content.blocks import render_blocks
from mcp_app.core.context import RequestContext, resources_of
from mcp_app.core.errors import HandlerError
from mcp_app.core.types import PromptDef
from mcp_app.governance import decision, guardrails
from mcp_app.protocol import asking, shaping, upstream_extras
from mcp_app.protocol.jsonrpc import InternalError, InvalidParams, truncate
from mcp_app.protocol.pagination import paginate, with_cursor

ROLES = ("user", "assistant")


def describe(prompt: PromptDef) -> dict[str, Any]:
    """The newest-revision Prompt object (argument completions stay server-side)."""
    arguments = [
        {
            "name": a.get("name"),
            "title": a.get("title"),
            "description": a.get("description"),
            "required": bool(a.get("required", False)) and not a.get("ask"),
        }
        for a in prompt.arguments
        if isinstance(a, dict) and isinstance(a.get("name"), str)
    ]
    return {
        "name": prompt.name,
        "title": prompt.title,
        "description": prompt.description,
        "arguments": arguments,
        "icons": prompt.icons,
        "_meta": prompt.meta,
    }


async def handle_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    shown = await decision.shown(ctx, catalog, catalog.prompts)
    page, next_cursor = paginate(ctx, params, "prompts", shown, lambda p: p.name)
    prompts = [shaping.prompt(describe(p), ctx.protocol_version) for p in page]
    return with_cursor({"prompts": prompts}, next_cursor)


def _arguments(arguments: Any) -> dict[str, str]:
    """The request's arguments, checked (PR-05): an object of strings."""
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise InvalidParams('"arguments" must be a JSON object of strings.')
    wrong = sorted(k for k, v in arguments.items() if not isinstance(v, str))
    if wrong:
        raise InvalidParams(truncate(f"Prompt arguments must be strings: {', '.join(wrong)}.", 300))
    return arguments


def _declared(prompt: PromptDef) -> list[dict[str, Any]]:
    return [a for a in prompt.arguments if isinstance(a, dict) and isinstance(a.get("name"), str)]


def _form(prompt: PromptDef, wanted: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The elicitation that asks the person for the arguments `wanted`."""
    properties = {
        a["name"]: {
            "type": "string",
            "title": a.get("title") or a["name"],
            **({"description": a["description"]} if a.get("description") else {}),
        }
        for a in wanted
    }
    required = [a["name"] for a in wanted if a.get("required")]
    label = prompt.title or prompt.name
    return f"The prompt {label!r} needs: {', '.join(properties)}.", {
        "type": "object",
        "properties": properties,
        **({"required": required} if required else {}),
    }


async def _variables(ctx: RequestContext, prompt: PromptDef, arguments: dict[str, str]) -> dict[str, str]:
    """The declared arguments, the ones marked `ask` asked for when left out; undeclared names are ignored."""
    declared = _declared(prompt)
    given = {a["name"]: arguments[a["name"]] for a in declared if a["name"] in arguments}
    wanted = [a for a in declared if a.get("ask") and a["name"] not in given]
    if wanted and asking.can_ask(ctx, "elicitation/create"):
        message, schema = _form(prompt, wanted)
        try:
            answer = await ctx.elicit(message, schema)
        except HandlerError as exc:  # a legacy client that answered with an error, or not in time
            raise InvalidParams(
                truncate(f"Prompt {prompt.name!r} asked for its arguments: {exc.message}")
            ) from None
        content = answer.get("content") if answer.get("action") == "accept" else None
        if isinstance(content, dict):
            given.update(
                {a["name"]: str(content[a["name"]]) for a in wanted if content.get(a["name"]) is not None}
            )
    missing = [a["name"] for a in declared if a.get("required") and a["name"] not in given]
    if missing:
        raise InvalidParams(f"Missing required argument(s) for prompt {prompt.name!r}: {', '.join(missing)}.")
    return given


async def handle_get(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Render the prompt's messages with the arguments as template variables."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams('prompts/get needs "name" (a string).')
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    prompt = catalog.prompts_by_name.get(name)
    if prompt is None or decision.hidden(ctx, catalog, prompt, "prompts/get"):
        raise InvalidParams(truncate(f"Unknown prompt: {name}", 200))
    arguments = _arguments(params.get("arguments"))
    if (denial := decision.check(ctx, catalog, prompt, dict(arguments), "prompts/get")) is not None:
        raise InvalidParams(truncate(denial.message("prompt", name), 300), data={"policy": denial.policy})
    # The guardrails (AMB-354) on the arguments, then on the messages rendered with them.
    guarded = await guardrails.scan(ctx, "prompts/get", catalog, name, arguments, "arguments", "arguments")
    if guarded.blocked is not None:
        raise InvalidParams(guarded.blocked.message(), data={"guardrail": guarded.blocked.guardrail})
    arguments = guarded.value
    if prompt.upstream is not None:
        result = await upstream_extras.get_prompt(ctx, prompt.upstream, arguments)
        messages = [
            shaping.prompt_message(m, ctx.protocol_version)
            for m in result["messages"]
            if m.get("role") in ROLES
        ]
        result = {**result, "messages": messages}
    else:
        ctx = ctx.but(resources=resources_of(catalog.resources_by_uri))

        async def render(ctx: RequestContext) -> dict[str, Any]:
            return await _render(ctx, prompt, await _variables(ctx, prompt, arguments))

        result = await asking.answering(ctx, "prompts/get", name, arguments, params, render)
        if "messages" not in result:
            return result  # a question for the client: InputRequiredResult
    guarded = await guardrails.scan(ctx, "prompts/get", catalog, name, result, "result", "prompt")
    if guarded.blocked is not None:
        raise InternalError(guarded.blocked.message(), data={"guardrail": guarded.blocked.guardrail})
    scanned: dict[str, Any] = guarded.value
    return scanned


async def _render(ctx: RequestContext, prompt: PromptDef, variables: dict[str, str]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for message in prompt.messages:
        role = message.get("role") if isinstance(message, dict) else None
        spec = message.get("content") if isinstance(message, dict) else None
        if role not in ROLES or not isinstance(spec, dict):
            raise ValueError(f"prompt {prompt.name!r} has a malformed message")  # -32603 via the funnel
        # One block per PromptMessage: a spec that renders to several blocks gives several messages.
        try:
            blocks = await render_blocks(ctx, [spec], variables)
        except HandlerError as exc:
            # The prompt itself is broken (bad template, missing resource): a server-side fault,
            # reported with the handler's client-safe message (PR-04).
            raise InternalError(
                truncate(f"Prompt {prompt.name!r} could not be rendered: {exc.message}")
            ) from None
        for block in blocks:
            messages.append(shaping.prompt_message({"role": role, "content": block}, ctx.protocol_version))
    result: dict[str, Any] = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result
