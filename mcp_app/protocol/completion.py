"""completion/complete for prompt arguments and template variables (CP-01..05).

Configured values (PromptDef.arguments[i]["completions"], TemplateDef.completions[variable]) take
one of two shapes:

- a list of strings: offered whatever else the client has filled in;
- an object depending on another argument, used with 2025-06-18+ `context.arguments`:
  {"argument": "language", "values": {"python": ["black", "ruff"], "go": ["gofmt"]}, "default": [...]}
  — the list under the other argument's current value, else `default` (or nothing).

Values are filtered by case-insensitive prefix of `argument.value`, keep their configured order
(the operator ranks them), and at most 100 are returned with `total` and `hasMore` (CP-02).
"""

from __future__ import annotations

from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.core.context import RequestContext
from mcp_app.core.versions import V2025_06_18
from mcp_app.governance import decision
from mcp_app.protocol import upstream_extras
from mcp_app.protocol.jsonrpc import InvalidParams, truncate
from mcp_app.protocol.uritemplates import variable_names

MAX_VALUES = 100


def _configured_values(config: Any, context: dict[str, str]) -> list[str]:
    if isinstance(config, list):
        return [str(v) for v in config]
    if isinstance(config, dict):
        other = context.get(str(config.get("argument", "")))
        by_value = config.get("values")
        if other is not None and isinstance(by_value, dict) and isinstance(by_value.get(other), list):
            return [str(v) for v in by_value[other]]
        if isinstance(config.get("default"), list):
            return [str(v) for v in config["default"]]
    return []


def _context_arguments(ctx: RequestContext, params: dict[str, Any]) -> dict[str, str]:
    if ctx.protocol_version < V2025_06_18:
        return {}  # older revisions define no context: nothing to honour
    context = params.get("context")
    if context is None:
        return {}
    arguments = context.get("arguments") if isinstance(context, dict) else None
    if arguments is None:
        return {}
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        raise InvalidParams('"context.arguments" must be an object of strings.')
    return arguments


async def handle_complete(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or not isinstance(ref.get("type"), str):
        raise InvalidParams(
            '"ref" must be {"type": "ref/prompt", "name"} or {"type": "ref/resource", "uri"}.'
        )
    if (
        not isinstance(argument, dict)
        or not isinstance(argument.get("name"), str)
        or not isinstance(argument.get("value"), str)
    ):
        raise InvalidParams('"argument" must be {"name": string, "value": string}.')
    context = _context_arguments(ctx, params)
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    name = argument["name"]

    if ref["type"] == "ref/prompt":
        prompt_name = ref.get("name")
        prompt = catalog.prompts_by_name.get(prompt_name) if isinstance(prompt_name, str) else None
        if prompt is None or decision.hidden(ctx, catalog, prompt, "completion/complete"):
            raise InvalidParams(truncate(f"Unknown prompt: {ref.get('name')}", 200))
        declared = {a.get("name"): a for a in prompt.arguments if isinstance(a, dict)}
        if name not in declared:
            raise InvalidParams(truncate(f"Prompt {prompt.name!r} has no argument {name!r}.", 300))
        if prompt.upstream is not None:
            return await upstream_extras.complete(ctx, prompt.upstream, ref, argument, context)
        config = declared[name].get("completions")
    elif ref["type"] == "ref/resource":
        uri = ref.get("uri")
        template = next((t for t in catalog.templates if t.uri_template == uri), None)
        if template is None or decision.hidden(ctx, catalog, template, "completion/complete"):
            raise InvalidParams(truncate(f"Unknown resource template: {uri}", 300))
        if name not in variable_names(template.uri_template):
            raise InvalidParams(
                truncate(f"Template {template.uri_template!r} has no variable {name!r}.", 300)
            )
        if template.upstream is not None:
            return await upstream_extras.complete(ctx, template.upstream, ref, argument, context)
        config = template.completions.get(name)
    else:
        raise InvalidParams(truncate(f"Unknown reference type: {ref['type']}", 200))

    prefix = argument["value"].casefold()
    matches = [v for v in _configured_values(config, context) if v.casefold().startswith(prefix)]
    return {
        "completion": {
            "values": matches[:MAX_VALUES],
            "total": len(matches),
            "hasMore": len(matches) > MAX_VALUES,
        }
    }
