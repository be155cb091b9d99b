"""What the Try page shows (AMB-251): a result as a client shows it, and what running the tool does.

`view` turns a tools/call answer into blocks the page draws (static/mcpsite/try_tool.js, and the
template without script): text, an image or an audio player from its base64 data, a resource link,
an embedded resource, structured content as a table, an error in plain words. Only what is safe to
put in a page comes out: a media block's data is checked to be base64 of an image or audio type, so
it can only ever be a `data:` URL of that type. The raw JSON stays one click away on the page.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from mcp_app.core.types import ToolDef
from mcp_app.protocol.jsonrpc import MissingRequiredClientCapability

_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]*={0,2}\s*$")
_MEDIA_TYPE = re.compile(r"^(image|audio)/[A-Za-z0-9.+-]+$")
# A table shows at most this many rows; the raw JSON has the rest.
MAX_ROWS = 200


def view(response: dict[str, Any]) -> dict[str, Any]:
    """{"is_error", "protocol_error", "blocks", "table"?, "explain"?} for a JSON-RPC response."""
    if "error" in response:
        error = response["error"] if isinstance(response["error"], dict) else {}
        explained = _explain_error(error)
        blocks = [{"kind": "error", "text": str(error.get("message", "The server refused the call."))}]
        out: dict[str, Any] = {"is_error": False, "protocol_error": True, "blocks": blocks}
        if explained:
            out["explain"] = explained
        return out
    result = found if isinstance(found := response.get("result"), dict) else {}
    blocks = [_block(item) for item in result.get("content") or [] if isinstance(item, dict)]
    out = {"is_error": bool(result.get("isError")), "protocol_error": False, "blocks": blocks}
    if result.get("resultType") == "input_required":
        out["blocks"] = [{"kind": "note", "text": "The tool asks the client first (input required)."}]
    if "structuredContent" in result:
        out["table"] = table(result["structuredContent"])
    return out


def _block(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "text":
        return {"kind": "text", "text": str(item.get("text", ""))}
    if kind in ("image", "audio"):
        media, data = item.get("mimeType"), item.get("data")
        if (
            isinstance(media, str)
            and media.startswith(f"{kind}/")
            and _MEDIA_TYPE.match(media)
            and isinstance(data, str)
            and _BASE64.match(data)
        ):
            return {"kind": kind, "src": f"data:{media};base64,{''.join(data.split())}", "mime": media}
        return {"kind": "note", "text": f"An {kind} the page cannot show (its type or data is not valid)."}
    if kind == "resource_link":
        return {
            "kind": "resource_link",
            "uri": str(item.get("uri", "")),
            "name": str(item.get("title") or item.get("name") or item.get("uri", "")),
            "mime": str(item.get("mimeType", "")),
            "description": str(item.get("description", "")),
        }
    if kind == "resource":
        resource = found if isinstance(found := item.get("resource"), dict) else {}
        text = resource.get("text")
        return {
            "kind": "resource",
            "uri": str(resource.get("uri", "")),
            "mime": str(resource.get("mimeType", "")),
            "text": text if isinstance(text, str) else "",
            "binary": "blob" in resource,
        }
    return {"kind": "json", "text": json.dumps(item, indent=2, ensure_ascii=False)}


def table(value: Any) -> dict[str, Any]:
    """Structured content as {"columns", "rows"} of display strings: an object is one row (or, when
    its one value is a list of objects, those rows); a list of objects is its rows; else one cell."""
    if isinstance(value, dict) and len(value) == 1:
        only = next(iter(value.values()))
        if isinstance(only, list) and only and all(isinstance(row, dict) for row in only):
            value = only
    if isinstance(value, dict):
        rows = [value]
    elif isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        rows = value
    else:
        return {"columns": ["value"], "rows": [[_cell(value)]]}
    columns: list[str] = []
    for row in rows[:MAX_ROWS]:
        columns.extend(key for key in row if key not in columns)
    cells = [[_cell(row[key]) if key in row else "" for key in columns] for row in rows[:MAX_ROWS]]
    return {"columns": columns, "rows": cells, "more": max(0, len(rows) - MAX_ROWS)}


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _explain_error(error: dict[str, Any]) -> str:
    """For a -32021 (2026-07-28: the client lacks a capability): that every such client gets it too."""
    if error.get("code") != MissingRequiredClientCapability.code:
        return ""
    data = found if isinstance(found := error.get("data"), dict) else {}
    required = data.get("requiredCapabilities")
    names = ", ".join(sorted(required)) if isinstance(required, dict) and required else "it"
    return (
        f"Every client that does not declare {names} gets this same answer. To try the tool as a client "
        "that does, tick it under \"The client declares\" and run again."
    )


def what_happens(tool: ToolDef) -> str:
    """One sentence: what running this tool really does, for its kind."""
    config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
    kind = tool.handler
    if kind == "template":
        return "A template tool fills its text with the arguments: nothing leaves the server."
    if kind == "http":
        return f"An http tool sends its request to {_host(config.get('url'))}: that service really receives it."
    if kind == "python":
        return f"A python tool runs the callable {config.get('callable', '?')!r} on the server."
    if kind == "form":
        return "A form tool asks the person to fill its form (you answer it on this page), then returns the answers."
    if kind == "llm":
        endpoint = config.get("endpoint")
        if isinstance(endpoint, dict):
            return f"An llm tool sends its prompt to its endpoint at {_host(endpoint.get('url'))}, which really receives it."
        return (
            "An llm tool asks the client's own model (sampling): you see the request on this page and "
            "type the model's reply."
        )
    if kind == "upstream":
        upstream = tool.upstream.name if tool.upstream is not None else config.get("upstream", "?")
        return (
            f"An upstream tool calls {config.get('tool', '?')!r} on the upstream server "
            f"{upstream!r}: that server really runs it."
        )
    return f"A {kind} tool runs on the server."


def _host(url: Any) -> str:
    try:
        host = urlsplit(url).hostname if isinstance(url, str) else None
    except ValueError:
        host = None
    return host or "its URL"
