"""Handler kinds a tool or resource template row can name, and the one funnel that runs them.

A kind is one module exposing ``async def run(ctx, tool, arguments) -> dict``, its configuration's
schema (``handler.<kind>`` in content/fields.schema.json, ``read.<kind>`` for a resource template)
and, for what a schema cannot say, ``def config_problems(config) -> list[str]``; resource-template
kinds also expose
``async def read(ctx, template, uri, variables) -> list[dict]``; a kind whose tools must not hear an
argument their definition does not declare exposes ``undeclared(tool, arguments) -> list[str]`` and
``refusal(tool, names) -> str`` (the upstream kind, AMB-280). Adding a kind is one module
and one line in ``KINDS``. Modules are imported on first use so the admin and the protocol core
load only what they call.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from types import ModuleType
from typing import Any

from django.core.exceptions import ValidationError

from mcp_app.content import fields
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import (
    GENERIC_TOOL_ERROR,
    AskOutcome,
    HandlerError,
    ProtocolError,
    UnknownKind,
    error_result,
)
from mcp_app.core.types import TemplateDef, ToolDef

logger = logging.getLogger(__name__)

KINDS: dict[str, str] = {
    "template": "mcp_app.handlers.template",
    "http": "mcp_app.handlers.http",
    "python": "mcp_app.handlers.python",
    "form": "mcp_app.handlers.form",
    "llm": "mcp_app.handlers.llm",
    "upstream": "mcp_app.handlers.upstream",
}

# Kinds that can produce resource-template contents (they define ``read``).
TEMPLATE_KINDS: dict[str, str] = {
    "template": "mcp_app.handlers.template",
    "python": "mcp_app.handlers.python",
}

_LABELS = {
    "template": "Template (Django template over the arguments)",
    "http": "HTTP (POST the arguments to your HTTPS endpoint)",
    "python": "Python (a callable registered by the operator)",
    "form": "Form (ask the person to fill in fields, then answer)",
    "llm": "LLM (send a prompt over the arguments to the client's model or your endpoint)",
    "upstream": "Upstream (a tool of an upstream MCP server, published from its Upstream page)",
}


def kind_choices() -> list[tuple[str, str]]:
    """Return (value, label) pairs for the admin's handler field."""
    return [(name, _LABELS.get(name, name)) for name in KINDS]


def template_kind_choices() -> list[tuple[str, str]]:
    """Return (value, label) pairs for a resource template's handler field."""
    return [(name, _LABELS.get(name, name)) for name in TEMPLATE_KINDS]


def load_kind(name: str) -> ModuleType:
    """Import and return the module implementing kind ``name``."""
    try:
        path = KINDS[name]
    except KeyError:
        raise UnknownKind(f"Unknown handler kind {name!r}.") from None
    return importlib.import_module(path)


def config_problems(kind: str, config: Any) -> list[str]:
    """Every problem of ``config`` for a tool of ``kind``: its schema, then the kind's own rules."""
    if kind not in KINDS:
        return [f"Unknown handler kind {kind!r}; choose one of: {', '.join(KINDS)}."]
    found = fields.problems(f"handler.{kind}", config)
    rules = getattr(load_kind(kind), "config_problems", None)
    if rules is not None and isinstance(config, dict):
        found += [m for m in rules(config) if m not in found]
    return found


def template_config_problems(kind: str, config: Any) -> list[str]:
    """Every problem of ``config`` for a resource template of ``kind``."""
    if kind not in TEMPLATE_KINDS:
        return [f"Resource templates support the handler kinds {', '.join(TEMPLATE_KINDS)}, not {kind!r}."]
    found = fields.problems(f"read.{kind}", config)
    rules = getattr(load_kind(kind), "config_problems", None)
    if rules is not None and isinstance(config, dict):
        found += [m for m in rules(config) if m not in found]
    return found


def validate_config(kind: str, config: Any) -> None:
    """Raise ValidationError listing every problem when ``config`` is wrong for ``kind``."""
    found = config_problems(kind, config)
    if found:
        raise ValidationError(found)


def validate_template_config(kind: str, config: Any) -> None:
    """Raise ValidationError listing every problem when ``config`` is wrong for a resource template of ``kind``."""
    found = template_config_problems(kind, config)
    if found:
        raise ValidationError(found)


def refused_arguments(tool: ToolDef, arguments: dict[str, Any]) -> tuple[list[str], str] | None:
    """The arguments refused before anything runs, and why, when the tool's kind refuses some; else None."""
    module = load_kind(tool.handler) if tool.handler in KINDS else None
    check = getattr(module, "undeclared", None)
    if check is None:
        return None
    names = check(tool, arguments)
    return (names, module.refusal(tool, names)) if names and module is not None else None


def _normalise(result: Any) -> dict[str, Any]:
    # Kinds return CallToolResult dicts; guard the shape so a sloppy kind cannot break the wire.
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        raise TypeError(f"handler returned {type(result).__name__}, not a CallToolResult dict")
    out: dict[str, Any] = {"content": result["content"]}
    if result.get("structuredContent") is not None:
        out["structuredContent"] = result["structuredContent"]
    if result.get("isError"):
        out["isError"] = True
    if result.get("_meta"):
        out["_meta"] = result["_meta"]
    return out


async def run_inline(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run ``tool`` in this process within its timeout; never raises for tool faults (a handler's
    ProtocolError is not one: it becomes the call's JSON-RPC error, a task's `failed`)."""
    try:
        module = load_kind(tool.handler)
        async with asyncio.timeout(tool.timeout_seconds or None):
            result = await module.run(ctx, tool, arguments)
        return _normalise(result)
    except (AskOutcome, ProtocolError):
        # The call waits for the client's answer (2026-07-28), or the handler failed at the protocol
        # level (AMB-285): protocol outcomes, not faults the model reads.
        raise
    except HandlerError as exc:
        return error_result(exc.message)
    except TimeoutError:
        return error_result(f"The tool did not finish within {tool.timeout_seconds} seconds.")
    except Exception:
        logger.exception("tool %r (id %s) of tenant %s failed", tool.name, tool.id, ctx.tenant.slug)
        return error_result(GENERIC_TOOL_ERROR)


async def read_template(
    ctx: RequestContext, template: TemplateDef, uri: str, variables: dict[str, str]
) -> list[dict[str, Any]]:
    """Return the resource contents of ``uri`` expanded from ``template``.

    Raises HandlerError (message safe for the client) when the kind cannot read or fails
    in a way it reports; other exceptions propagate to the protocol's error funnel.
    """
    if template.handler not in TEMPLATE_KINDS:
        raise UnknownKind(f"Resource template handler {template.handler!r} cannot produce contents.")
    module = load_kind(template.handler)
    return await module.read(ctx, template, uri, variables)
