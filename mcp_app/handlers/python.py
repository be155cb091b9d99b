"""The ``python`` kind: callables the operator registers in code (tenants never upload code).

Register with the decorator in any module listed in ``settings.MCP_PYTHON_HANDLER_MODULES``::

    @register("echo")
    async def echo(ctx: RequestContext, arguments: dict) -> dict | str | list[dict]: ...

Sync functions run in a worker thread. The return value becomes the result: a ``str`` is one text
block; a ``list`` is the content blocks; a ``dict`` with a ``content`` list is a CallToolResult as is;
any other ``dict`` is structuredContent plus a text block of its JSON. Raise
``registry.ToolError("...")`` for a failure the model should see, ``core.errors.ProtocolError(code,
message)`` for one at the protocol level (the call's JSON-RPC error, a task's ``failed``: AMB-285). With
``"asks_before_task": true`` in its configuration, ``await ctx.as_task()`` after its questions makes a
2026-07-28 call's task there (AMB-286).

For resource templates the callable gets the URI variables as ``arguments`` and returns a ``str``
(text contents), ``bytes`` (blob contents), a ``dict`` (JSON text) or a list of ResourceContents.

Tool and resource template ``handler_config``: ``{"callable": "<registered name>"}``.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import TemplateDef, ToolDef

PythonHandler = Callable[[RequestContext, dict[str, Any]], Any]

_REGISTRY: dict[str, PythonHandler] = {}
_modules_loaded = False


def register(name: str) -> Callable[[PythonHandler], PythonHandler]:
    """Register ``fn`` as the python handler called ``name``."""

    def decorator(fn: PythonHandler) -> PythonHandler:
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not fn and _qualname(existing) != _qualname(fn):
            raise ValueError(f"python handler {name!r} is already registered by {_qualname(existing)}")
        _REGISTRY[name] = fn
        return fn

    return decorator


def _qualname(fn: PythonHandler) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _load_modules() -> None:
    global _modules_loaded
    if _modules_loaded:
        return
    for module in settings.MCP_PYTHON_HANDLER_MODULES:
        importlib.import_module(module)
    _modules_loaded = True


def registered_names() -> list[str]:
    """Return the registered callable names, sorted (the admin's choices)."""
    _load_modules()
    return sorted(_REGISTRY)


def get_callable(name: Any) -> PythonHandler:
    """Return the registered callable ``name``; ToolError when there is none."""
    _load_modules()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ToolError(f"No python handler is registered as {name!r}.")
    return _REGISTRY[name]


async def call(fn: PythonHandler, ctx: RequestContext, arguments: dict[str, Any]) -> Any:
    """Call ``fn``; sync callables run in a worker thread so they cannot block the event loop."""
    if inspect.iscoroutinefunction(fn):
        return await fn(ctx, arguments)
    return await sync_to_async(fn, thread_sensitive=False)(ctx, arguments)


def to_result(value: Any) -> dict[str, Any]:
    """Turn a callable's return value into a CallToolResult dict."""
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, list):
        return {"content": value}
    if isinstance(value, dict):
        if isinstance(value.get("content"), list):
            return value
        return {
            "content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": value,
        }
    if value is None:
        return {"content": []}
    raise TypeError(f"python handler returned {type(value).__name__}")


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the registered callable named in the tool's configuration."""
    fn = get_callable(tool.handler_config.get("callable"))
    return to_result(await call(fn, ctx, arguments))


def _contents(uri: str, mime_type: str, value: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"uri": uri}
    if mime_type:
        item["mimeType"] = mime_type
    if isinstance(value, bytes):
        item["blob"] = base64.b64encode(value).decode("ascii")
    elif isinstance(value, str):
        item["text"] = value
    else:
        item["text"] = json.dumps(value, ensure_ascii=False)
        item.setdefault("mimeType", "application/json")
    return item


async def read(ctx: RequestContext, template: TemplateDef, uri: str, variables: dict[str, str]) -> list[dict]:
    """Return the contents the registered callable produces for the URI variables."""
    fn = get_callable(template.handler_config.get("callable"))
    value = await call(fn, ctx, dict(variables))
    if isinstance(value, list):
        return value
    return [_contents(uri, template.mime_type, value)]


def config_problems(config: dict[str, Any]) -> list[str]:
    """The callable must be registered: which are is known at run time only, so no schema can list them."""
    name = config.get("callable")
    names = registered_names()
    if isinstance(name, str) and name and name not in names:
        return [
            f"'callable' must name a registered python handler ({', '.join(names) or 'none registered'}), got {name!r}."
        ]
    return []
