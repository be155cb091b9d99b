"""The ``template`` kind: Django templates over the arguments, no code.

Tool ``handler_config``:

- ``"content"``: a list of content specs (see ``content.py``), or the shorthand ``"text": "<template>"``
  for one text block. The arguments are the template variables.
- ``"structured"`` (optional): a JSON object returned as ``structuredContent``; string values inside
  it are templates, a value that is exactly ``"{{ name }}"`` keeps the argument's JSON type, other
  JSON values are kept as they are. Without ``content`` the text block is the JSON of it.
- ``"is_error": true`` (optional): every result is an error result (``isError``), e.g. a stub
  that explains a retired tool.
- ``"error_when": "<argument name>"`` (optional): the result is an error result when that
  argument is present and truthy, so one template can answer both outcomes
  (``{% if failed %}…{% endif %}``).

Resource template ``handler_config``: ``{"text": "<template>"}`` rendered with the URI variables;
the contents' mimeType is the template row's.

Both configurations are checked by their schemas alone (``handler.template`` and ``read.template`` in
content/fields.schema.json, the templates compiled by its ``x-template``).

Arguments are only context data, never compiled: ``{{ settings.SECRET_KEY }}`` in an argument is
returned literally.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_app.content import rendering
from mcp_app.content.blocks import render_blocks
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ContentError
from mcp_app.core.types import TemplateDef, ToolDef


def _specs(config: dict[str, Any]) -> list[dict[str, Any]] | None:
    if "content" in config:
        return config["content"]
    if "text" in config:
        return [{"type": "text", "text": config["text"]}]
    return None


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Render the tool's content (and structured content) with the arguments."""
    config = tool.handler_config
    variables = dict(arguments)
    structured = (
        await rendering.value(ctx, config["structured"], variables) if "structured" in config else None
    )
    specs = _specs(config)
    if specs is not None:
        content = await render_blocks(ctx, specs, variables)
    elif structured is not None:
        content = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    else:
        content = []
    result: dict[str, Any] = {"content": content}
    if structured is not None:
        result["structuredContent"] = structured
    error_when = config.get("error_when")
    if config.get("is_error") or (error_when and arguments.get(error_when)):
        result["isError"] = True
    return result


async def read(ctx: RequestContext, template: TemplateDef, uri: str, variables: dict[str, str]) -> list[dict]:
    """Render the template's text with the URI variables into one text contents item."""
    source = template.handler_config.get("text")
    if not isinstance(source, str):
        raise ContentError("This resource template has no text to render.")
    contents: dict[str, Any] = {"uri": uri, "text": await rendering.text(ctx, source, dict(variables))}
    if template.mime_type:
        contents["mimeType"] = template.mime_type
    return [contents]
