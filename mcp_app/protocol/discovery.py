"""Search mode (AMB-376): tools/list offers three tools that find, browse and call all the others.

A tenant chooses full (every tool listed), search, or auto (search past SEARCH_PAST_TOOLS tools);
a client may ask for either with `?tools=full` or `?tools=search` on the MCP URL. In search mode the
list holds `search_tools`, `browse_tools` and `call_tool`. What they find is what this caller's
tools/list would have listed in full mode (protocol/tools.offered: the one decision, the era, MCP
Apps), so search results, browse pages and calls obey the same decision as lists and calls do.
A tool's real name keeps working in tools/call: a client that calls only listed tools uses call_tool.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

from mcp_app.catalog import search
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import error_result
from mcp_app.core.types import Catalog, ToolDef
from mcp_app.protocol import shaping
from mcp_app.protocol.jsonrpc import InvalidParams
from mcp_app.protocol.pagination import decode_cursor, encode_cursor

SEARCH_PAST_TOOLS = 40  # "auto": a list longer than this costs a model more than it helps it choose
DEFAULT_RESULTS = 10
MAX_RESULTS = 50
BROWSE_PAGE = 20
CHOICES = ("full", "search")

SEARCH = "search_tools"
BROWSE = "browse_tools"
CALL = "call_tool"


def _meta_tool(name: str, title: str, description: str, schema: dict[str, Any], read_only: bool) -> ToolDef:
    return ToolDef(
        id=0,
        name=name,
        title=title,
        description=description,
        input_schema={"type": "object", **schema, "additionalProperties": False},
        output_schema=None,
        annotations={"readOnlyHint": True, "idempotentHint": True} if read_only else {},
        icons=[],
        meta={},
        handler="discovery",
        handler_config={},
    )


TOOLS: tuple[ToolDef, ...] = (
    _meta_tool(
        BROWSE,
        "Browse tools",
        "List this server's tools in name order, 20 at a time: all of them, or those of one upstream "
        "server or tag. Without arguments it also names the upstreams and tags there are. Each tool "
        "comes with its full definition (input schema included); call one with call_tool.",
        {
            "properties": {
                "upstream": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "Only this upstream's tools.",
                },
                "tag": {"type": "string", "maxLength": 64, "description": "Only tools with this tag."},
                "cursor": {
                    "type": "string",
                    "maxLength": 1024,
                    "description": "nextCursor of the page before.",
                },
            }
        },
        read_only=True,
    ),
    _meta_tool(
        CALL,
        "Call a tool",
        "Call one of this server's tools by its name (from search_tools or browse_tools) with its "
        "arguments. It answers what that tool answers.",
        {
            "properties": {
                "name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "The tool's name.",
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, as its input schema says.",
                },
            },
            "required": ["name"],
        },
        read_only=False,
    ),
    _meta_tool(
        SEARCH,
        "Search tools",
        "Find this server's tools by words: their names (shortened words too), titles, descriptions, "
        "tags and the upstream server they come from. A tool's exact name finds it first. Each match "
        "comes with its full definition (input schema included); call one with call_tool.",
        {
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "description": "Words, or a tool's name.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "default": DEFAULT_RESULTS,
                },
            },
            "required": ["query"],
        },
        read_only=True,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}
# Where some tool may run as a task, call_tool may be called as one (2025-11-25 `params.task`): the
# named tool's own task support then decides, as its direct call's would.
TOOLS_WITH_TASKS = tuple(
    replace(tool, task_support="optional") if tool.name == CALL else tool for tool in TOOLS
)


def listed(ctx: RequestContext) -> tuple[ToolDef, ...]:
    """The three tools a search-mode tools/list holds."""
    return TOOLS_WITH_TASKS if ctx.tenant.has_task_tools else TOOLS


def choice_of(query: str) -> str:
    """The mode a client asked for with `?tools=` on the MCP URL ("" for the tenant's own)."""
    asked = parse_qs(query).get("tools", [""])[-1] if "tools=" in query else ""
    return asked if asked in CHOICES else ""


def searching(ctx: RequestContext, catalog: Catalog) -> bool:
    """Whether this request's tools/list offers the search tools instead of every tool."""
    mode = ctx.discovery or ctx.tenant.tool_discovery
    return mode == "search" or (mode == "auto" and len(catalog.tools) > SEARCH_PAST_TOOLS)


Offered = Callable[[RequestContext, Catalog], Awaitable[tuple[ToolDef, ...]]]
Describe = Callable[[ToolDef], dict[str, Any]]


async def answer(
    ctx: RequestContext,
    catalog: Catalog,
    name: str,
    arguments: dict[str, Any],
    offered: Offered,
    describe: Describe,
) -> dict[str, Any]:
    """The CallToolResult of search_tools or browse_tools (their arguments passed their schemas)."""
    visible = await offered(ctx, catalog)
    allowed = None if visible is catalog.tools else frozenset(tool.name for tool in visible)
    index = await search.index_of(catalog)
    if name == SEARCH:
        found = index.search(arguments["query"], allowed, arguments.get("limit", DEFAULT_RESULTS))
        return _result({"tools": [shaping.tool(describe(t), ctx.protocol_version) for t in found]})
    upstream, tag = arguments.get("upstream"), arguments.get("tag")
    places = [p for p in index.group(upstream, tag) if allowed is None or index.tools[p].name in allowed]
    kind = "browse:" + json.dumps([upstream, tag])
    start = 0
    if (cursor := arguments.get("cursor")) is not None:
        try:
            after = decode_cursor(ctx, kind, cursor)
        except InvalidParams:
            return error_result(
                "Invalid cursor: pass the nextCursor of the page before, with the same upstream and tag."
            )
        start = bisect.bisect_right(places, after, key=lambda p: index.tools[p].name)  # name order
    page = places[start : start + BROWSE_PAGE]
    body: dict[str, Any] = {
        "tools": [shaping.tool(describe(index.tools[p]), ctx.protocol_version) for p in page]
    }
    if start + BROWSE_PAGE < len(places):
        body["nextCursor"] = encode_cursor(ctx, kind, index.tools[page[-1]].name)
    if cursor is None and upstream is None and tag is None:
        body["upstreams"] = _groups(index.upstreams, index, allowed)
        body["tags"] = _groups(index.tags, index, allowed)
    return _result(body)


def _groups(
    groups: dict[str, list[int]], index: search.Index, allowed: frozenset[str] | None
) -> list[dict[str, Any]]:
    counted = (
        (name, len(places) if allowed is None else sum(1 for p in places if index.tools[p].name in allowed))
        for name, places in sorted(groups.items())
    )
    return [{"name": name, "tools": count} for name, count in counted if count]


def _result(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(body, ensure_ascii=False)}],
        "structuredContent": body,
    }


def as_called(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """A tools/call's params as the tool it reaches calls it: call_tool's, outside full mode, as the call
    of the tool it names (usage counts that tool); any other call's as they are."""
    arguments = params.get("arguments")
    if params.get("name") != CALL or (ctx.discovery or ctx.tenant.tool_discovery) == "full":
        return params
    if not isinstance(arguments, dict) or not isinstance(arguments.get("name"), str):
        return params
    return unwrap(params, arguments)


def unwrap(params: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """call_tool's params as the call of the tool it names (its task and _meta kept)."""
    inner = arguments.get("arguments")
    return {**params, "name": arguments["name"], "arguments": {} if inner is None else inner}
