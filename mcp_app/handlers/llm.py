"""The ``llm`` kind: ask a model and return its answer, no code.

Tool ``handler_config``:

- ``"prompt"``: the user message, a template over the arguments.
- ``"system"`` (optional): the system prompt, a template over the arguments.
- ``"max_tokens"`` (optional, default 1000, at most 64 000) and ``"temperature"`` (optional, 0 to 2).
- ``"model_preferences"`` (optional): the MCP ModelPreferences the client weighs when it picks a model:
  ``hints`` (``[{"name": "…"}]``, substrings of model names, first match wins) and ``costPriority``,
  ``speedPriority``, ``intelligencePriority`` between 0 and 1.
- ``"endpoint"`` (optional): ``{"url": "https://…/v1/chat/completions", "model": "…", "timeout": 30}``,
  an OpenAI-compatible chat completions endpoint of the tenant's own. Its API key is a secret header
  (``Authorization: Bearer …``) in ``Tool.handler_secrets``, sent as the http kind sends its own.

Without an endpoint the client's model is asked (``sampling/createMessage``, through ctx.sample: a
round trip for 2026-07-28, a request on the call's stream for a legacy session), so the tenant needs
no API key and the person keeps control of what their model is asked. With one, the platform POSTs
``{"model", "messages", "max_tokens", "temperature"}`` through the http kind's ``send`` (SSRF guard,
pinned address, no redirects, reply size cap) and takes ``choices[0].message.content``.

A tool with an output schema gets the answer parsed as JSON (a fenced ```json block is accepted) as
its ``structuredContent``; an answer that is not JSON is an error result. Otherwise the answer is
one text block.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lib import nesting
from mcp_app.content import rendering
from mcp_app.core import ssrf
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import ToolDef
from mcp_app.handlers import http

DEFAULT_MAX_TOKENS = 1000
# A model asked for JSON often wraps it in a Markdown fence anyway.
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*?)\n?```\Z", re.DOTALL | re.IGNORECASE)


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask the model (the endpoint's, or the client's) the filled prompt; return its answer."""
    config = tool.handler_config
    prompt = await rendering.text(ctx, config["prompt"], dict(arguments))
    system = await rendering.text(ctx, config["system"], dict(arguments)) if "system" in config else None
    max_tokens = int(config.get("max_tokens", DEFAULT_MAX_TOKENS))
    if "endpoint" in config:
        answer, truncated = await _ask_endpoint(ctx, tool, prompt, system, max_tokens)
    else:
        answer, truncated = await _ask_client(ctx, config, prompt, system, max_tokens)
    if not tool.output_schema:
        return {"content": [{"type": "text", "text": answer}]}
    try:
        value = nesting.loads(_unfenced(answer))
    except nesting.TooDeep as exc:
        raise ToolError(
            f"The model's answer is JSON {exc}, and this tool returns structured output."
        ) from None
    except ValueError:
        why = f" (it stopped at the {max_tokens}-token limit)" if truncated else ""
        raise ToolError(
            f"The model's answer was not JSON{why}, and this tool returns structured output."
        ) from None
    return {
        "content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
        "structuredContent": value,
    }


async def _ask_client(
    ctx: RequestContext, config: dict[str, Any], prompt: str, system: str | None, max_tokens: int
) -> tuple[str, bool]:
    params: dict[str, Any] = {}
    if system is not None:
        params["systemPrompt"] = system
    if "temperature" in config:
        params["temperature"] = config["temperature"]
    if "model_preferences" in config:
        params["modelPreferences"] = config["model_preferences"]
    messages = [{"role": "user", "content": {"type": "text", "text": prompt}}]
    result = await ctx.sample(messages, max_tokens, **params)
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    if not texts:
        kinds = sorted({str(b.get("type")) for b in blocks if isinstance(b, dict)}) or ["no"]
        raise ToolError(f"The client's model answered with {' and '.join(kinds)} content, not text.")
    return "\n".join(texts), result.get("stopReason") == "maxTokens"


async def _ask_endpoint(
    ctx: RequestContext, tool: ToolDef, prompt: str, system: str | None, max_tokens: int
) -> tuple[str, bool]:
    config = tool.handler_config
    endpoint = config["endpoint"]
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": prompt})
    body: dict[str, Any] = {"model": endpoint["model"], "messages": messages, "max_tokens": max_tokens}
    if "temperature" in config:
        body["temperature"] = config["temperature"]
    timeout = http.timeout_for(tool, endpoint.get("timeout"))
    reply = await http.send(ctx, tool, "POST", endpoint["url"], timeout, json_body=body)
    if not 200 <= reply.status < 300:
        raise ToolError(http.status_message(reply.status, reply.reason))
    try:
        choice = nesting.loads(reply.body)["choices"][0]
        answer = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ToolError(
            "The model endpoint's reply was not a chat completion (no choices[0].message.content)."
        ) from None
    if isinstance(answer, list):
        # Some compatible servers answer with content parts rather than a string.
        answer = "".join(p["text"] for p in answer if isinstance(p, dict) and isinstance(p.get("text"), str))
    if not isinstance(answer, str):
        raise ToolError("The model endpoint answered without text (choices[0].message.content is empty).")
    return answer, isinstance(choice, dict) and choice.get("finish_reason") == "length"


def _unfenced(answer: str) -> str:
    stripped = answer.strip()
    fenced = _FENCE.match(stripped)
    return fenced.group(1) if fenced else stripped


def config_problems(config: dict[str, Any]) -> list[str]:
    """The endpoint's URL must be one the SSRF guard could call (ssrf.split_url: the guard's own rules,
    shared with the call, rather than a pattern beside them); the rest is the ``handler.llm`` schema."""
    endpoint = config.get("endpoint")
    url = endpoint.get("url") if isinstance(endpoint, dict) else None
    if not isinstance(url, str) or not url:
        return []
    try:
        ssrf.split_url(url)
    except ToolError as exc:
        return [exc.message]
    return []
