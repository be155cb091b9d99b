"""Shape every outgoing object to the negotiated revision's schema (MV-01, AMB-14).

Results are built in the newest shape (2025-11-25) and cut down here: an older client never sees a
field its schema.ts does not define (old clients may validate strictly), and content types it
cannot know are converted to text rather than silently dropped, so the model still learns of them.

What each revision adds (schema.ts of 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25):
- 2025-03-26: ToolAnnotations, audio content, the `completions` capability.
- 2025-06-18: `title` (Tool, Resource, ResourceTemplate, Prompt, PromptArgument, Implementation),
  Tool.outputSchema, CallToolResult.structuredContent, resource_link content, Annotations.lastModified,
  `_meta` on definitions, content blocks and resource contents.
- 2025-11-25: `icons` (Tool, Resource, ResourceTemplate, Prompt, Implementation, ResourceLink),
  Implementation.description / websiteUrl, Tool.execution.
- 2026-07-28: Tool.execution is gone (task support moved to an extension); structuredContent may be
  any JSON value; every result carries `resultType` (added by the dispatcher, with the caching hints).
"""

from __future__ import annotations

import json
from typing import Any

from mcp_app.core.versions import V2025_03_26, V2025_06_18, V2025_11_25, V2026_07_28

Obj = dict[str, Any]


def _keys(version: str, base: set[str], *later: tuple[str, set[str]]) -> set[str]:
    keys = set(base)
    for since, extra in later:
        if version >= since:
            keys |= extra
    return keys


def _pick(obj: Obj, keys: set[str]) -> Obj:
    # Empty optional fields are left out: an empty title or description says nothing.
    return {k: v for k, v in obj.items() if k in keys and v not in (None, "", [], {})}


def _required(obj: Obj, keys: set[str], required: tuple[str, ...]) -> Obj:
    shaped = _pick(obj, keys)
    for key in required:
        if key in keys and key in obj and key not in shaped:
            shaped[key] = obj[key]
    return shaped


# --- Common pieces ------------------------------------------------------------------------------

ICON_KEYS = {"src", "mimeType", "sizes", "theme"}
TOOL_ANNOTATION_KEYS = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


def icons(items: Any) -> list[Obj]:
    return [_pick(i, ICON_KEYS) for i in items or () if isinstance(i, dict) and i.get("src")]


def annotations_for(obj: Any, version: str) -> Obj:
    """Annotations on resources, templates and content blocks (lastModified is 2025-06-18+)."""
    if not isinstance(obj, dict):
        return {}
    keys = _keys(version, {"audience", "priority"}, (V2025_06_18, {"lastModified"}))
    return {k: v for k, v in obj.items() if k in keys and v is not None}


def _finish(shaped: Obj, source: Obj, version: str) -> Obj:
    """Shape the nested annotations and icons that survived the key filter."""
    if "annotations" in shaped:
        shaped["annotations"] = annotations_for(source["annotations"], version)
        if not shaped["annotations"]:
            del shaped["annotations"]
    if "icons" in shaped:
        shaped["icons"] = icons(source["icons"])
        if not shaped["icons"]:
            del shaped["icons"]
    return shaped


# --- Definitions --------------------------------------------------------------------------------


def tool(obj: Obj, version: str) -> Obj:
    keys = _keys(
        version,
        {"name", "description", "inputSchema"},
        (V2025_03_26, {"annotations"}),
        (V2025_06_18, {"title", "outputSchema", "_meta"}),
        (V2025_11_25, {"icons", "execution"}),
    )
    if version >= V2026_07_28:
        keys.discard("execution")
    shaped = _required(obj, keys, ("name", "inputSchema"))
    if "icons" in shaped:
        shaped["icons"] = icons(shaped["icons"]) or None
    if "annotations" in shaped or (version == V2025_03_26 and obj.get("title")):
        notes = {k: v for k, v in (obj.get("annotations") or {}).items() if k in TOOL_ANNOTATION_KEYS}
        if version == V2025_03_26 and obj.get("title") and "title" not in notes:
            # 2025-03-26 has no Tool.title; its display name lives in annotations.title (AMB-14).
            notes["title"] = obj["title"]
        shaped["annotations"] = notes or None
    return {k: v for k, v in shaped.items() if v is not None}


def prompt_argument(obj: Obj, version: str) -> Obj:
    keys = _keys(version, {"name", "description", "required"}, (V2025_06_18, {"title"}))
    shaped = _required(obj, keys, ("name",))
    if "required" in obj and isinstance(obj["required"], bool):
        shaped["required"] = obj["required"]
    return shaped


def prompt(obj: Obj, version: str) -> Obj:
    keys = _keys(
        version,
        {"name", "description", "arguments"},
        (V2025_06_18, {"title", "_meta"}),
        (V2025_11_25, {"icons"}),
    )
    shaped = _finish(_required(obj, keys, ("name",)), obj, version)
    if "arguments" in shaped:
        shaped["arguments"] = [prompt_argument(a, version) for a in obj["arguments"] if isinstance(a, dict)]
    return shaped


def resource(obj: Obj, version: str) -> Obj:
    keys = _keys(
        version,
        {"uri", "name", "description", "mimeType", "size", "annotations"},
        (V2025_06_18, {"title", "_meta"}),
        (V2025_11_25, {"icons"}),
    )
    shaped = _finish(_required(obj, keys, ("uri", "name")), obj, version)
    if isinstance(obj.get("size"), int):
        shaped["size"] = obj["size"]  # 0 is a size, not an empty field
    return shaped


def resource_template(obj: Obj, version: str) -> Obj:
    keys = _keys(
        version,
        {"uriTemplate", "name", "description", "mimeType", "annotations"},
        (V2025_06_18, {"title", "_meta"}),
        (V2025_11_25, {"icons"}),
    )
    return _finish(_required(obj, keys, ("uriTemplate", "name")), obj, version)


def server_info(obj: Obj, version: str) -> Obj:
    keys = _keys(
        version,
        {"name", "version"},
        (V2025_06_18, {"title"}),
        (V2025_11_25, {"description", "icons", "websiteUrl"}),
    )
    return _finish(_required(obj, keys, ("name", "version")), obj, version)


# --- Content ------------------------------------------------------------------------------------


def resource_contents(obj: Obj, version: str) -> Obj:
    keys = _keys(version, {"uri", "mimeType", "text", "blob"}, (V2025_06_18, {"_meta"}))
    return _required(obj, keys, ("uri", "text", "blob"))


def _link_as_text(block: Obj) -> str:
    label = block.get("title") or block.get("name") or block.get("uri", "")
    text = f"Resource link: {label} <{block.get('uri', '')}>"
    if block.get("description"):
        text += f" - {block['description']}"
    return text


def content_block(block: Obj, version: str) -> Obj:
    """Shape one content block, converting types the revision lacks to a text block (AMB-14)."""
    kind = block.get("type")
    if kind == "resource_link" and version < V2025_06_18:
        block = {"type": "text", "text": _link_as_text(block), "annotations": block.get("annotations")}
        kind = "text"
    elif kind == "audio" and version < V2025_03_26:
        mime = block.get("mimeType") or "audio"
        block = {
            "type": "text",
            "text": f"[{mime} audio content omitted: not supported by protocol revision {version}]",
            "annotations": block.get("annotations"),
        }
        kind = "text"
    base = {"type", "annotations"}
    if kind == "text":
        base |= {"text"}
    elif kind in ("image", "audio"):
        base |= {"data", "mimeType"}
    elif kind == "resource":
        base |= {"resource"}
    elif kind == "resource_link":
        base |= {"uri", "name", "title", "description", "mimeType", "size"}
        if version >= V2025_11_25:
            base |= {"icons"}
    keys = _keys(version, base, (V2025_06_18, {"_meta"}))
    shaped = _finish(_required(block, keys, ("type", "text", "data", "uri", "name")), block, version)
    if kind == "resource" and isinstance(block.get("resource"), dict):
        shaped["resource"] = resource_contents(block["resource"], version)
    if kind == "resource_link" and isinstance(block.get("size"), int):
        shaped["size"] = block["size"]
    return shaped


def content_blocks(blocks: Any, version: str) -> list[Obj]:
    return [content_block(b, version) for b in blocks or () if isinstance(b, dict)]


# --- Results ------------------------------------------------------------------------------------


def call_tool_result(result: Obj, version: str) -> Obj:
    """Shape a CallToolResult; structuredContent reaches 2025-06-18+ clients only."""
    shaped: Obj = {"content": content_blocks(result.get("content"), version)}
    structured = result.get("structuredContent")
    if structured is not None:
        if version >= V2025_06_18:
            shaped["structuredContent"] = structured
        elif not shaped["content"]:
            # An older client only sees content: it must not get an empty answer.
            shaped["content"] = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    if result.get("isError"):
        shaped["isError"] = True
    if isinstance(result.get("_meta"), dict) and result["_meta"]:
        shaped["_meta"] = result["_meta"]
    return shaped


def prompt_message(message: Obj, version: str) -> Obj:
    return {"role": message["role"], "content": content_block(message["content"], version)}
