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

from django.core.exceptions import ValidationError

from mcp_app.content import rendering
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import ToolDef
from mcp_app.handlers import http, ssrf
from mcp_app.handlers.config import check_keys, check_templates
from mcpsite import nesting

_KEYS = frozenset({"prompt", "system", "max_tokens", "temperature", "model_preferences", "endpoint"})
_ENDPOINT_KEYS = frozenset({"url", "model", "timeout"})
_PRIORITIES = ("costPriority", "speedPriority", "intelligencePriority")
DEFAULT_MAX_TOKENS = 1000
MAX_TOKENS_LIMIT = 64_000
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
        raise ToolError(f"The model's answer is JSON {exc}, and this tool returns structured output.") from None
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


def validate_config(config: dict[str, Any]) -> None:
    """Raise ValidationError unless ``config`` says what to ask a model, and how."""
    check_keys(config, _KEYS, "llm")
    if "prompt" not in config:
        raise ValidationError("An llm tool needs 'prompt': the message the model is sent.")
    check_templates(config, ("prompt", "system"))
    max_tokens = config.get("max_tokens", DEFAULT_MAX_TOKENS)
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens <= MAX_TOKENS_LIMIT
    ):
        raise ValidationError(f"'max_tokens' must be a whole number from 1 to {MAX_TOKENS_LIMIT}.")
    temperature = config.get("temperature", 0)
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= 2
    ):
        raise ValidationError("'temperature' must be a number from 0 to 2.")
    if "model_preferences" in config:
        if "endpoint" in config:
            raise ValidationError(
                "'model_preferences' guide the client's choice of model; with an 'endpoint' the model is "
                "the endpoint's 'model'. Remove one of them."
            )
        validate_model_preferences(config["model_preferences"])
    if "endpoint" in config:
        _validate_endpoint(config["endpoint"])


def validate_model_preferences(preferences: Any) -> None:
    """The ModelPreferences object of sampling/createMessage (schema.ts): hints and priorities 0..1."""
    if not isinstance(preferences, dict):
        raise ValidationError("'model_preferences' must be an object (hints, costPriority, ...).")
    extra = set(preferences) - {"hints", *_PRIORITIES}
    if extra:
        raise ValidationError(
            f"'model_preferences' may not have {', '.join(sorted(extra))}; it has hints, "
            f"{', '.join(_PRIORITIES)}."
        )
    hints = preferences.get("hints", [])
    if not isinstance(hints, list) or not all(
        isinstance(h, dict) and set(h) == {"name"} and isinstance(h["name"], str) and h["name"].strip()
        for h in hints
    ):
        raise ValidationError('\'hints\' must be a list of {"name": "<part of a model name>"} objects.')
    for key in _PRIORITIES:
        value = preferences.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValidationError(f"'{key}' must be a number from 0 to 1.")


def _validate_endpoint(endpoint: Any) -> None:
    if not isinstance(endpoint, dict):
        raise ValidationError('\'endpoint\' must be an object: {"url": "https://…", "model": "…"}.')
    extra = set(endpoint) - _ENDPOINT_KEYS
    if extra:
        raise ValidationError(f"Unknown 'endpoint' keys: {', '.join(sorted(extra))}.")
    url = endpoint.get("url")
    if not isinstance(url, str) or not url:
        raise ValidationError(
            "'endpoint' needs 'url': the chat completions URL, e.g. https://…/v1/chat/completions."
        )
    try:
        ssrf.split_url(url)
    except ToolError as exc:
        raise ValidationError(exc.message) from None
    model = endpoint.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ValidationError("'endpoint' needs 'model': the name of the model the endpoint runs.")
    timeout = endpoint.get("timeout", http.DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
        raise ValidationError("'endpoint' 'timeout' must be a number of seconds between 0 and 300.")
