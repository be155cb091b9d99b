"""The ``form`` kind: ask the person to fill in a form (elicitation), no code.

Tool ``handler_config``:

- ``"message"``: what the person is asked, a template over the arguments.
- ``"fields"``: the form, the flat JSON Schema elicitation allows (``requestedSchema``): an object
  whose properties are strings (``minLength``, ``maxLength``, ``format`` email/uri/date/date-time,
  ``enum``, or ``oneOf`` of ``{"const", "title"}``), numbers or integers (``minimum``, ``maximum``) or
  booleans, each with an optional ``title``, ``description`` and ``default``; ``required`` lists the
  ones that must be filled.
- ``"text"`` (optional): the reply, a template over the arguments and the answers (an answer wins
  over an argument of the same name). Without it, the answers as JSON.
- ``"sensitive": true`` (optional): the answers must not pass through the client (API keys, card
  numbers): the person fills the form on this platform's own page instead (URL-mode elicitation,
  handlers/url_forms.py), the client only asks their consent to open it. Needs a client with URL-mode
  elicitation (2025-11-25 or 2026-07-28); there is no fallback to an in-client form. The answers are
  not echoed back unless ``"text"`` names them, and never as ``structuredContent``.

The answers are returned as ``structuredContent``. A declined or cancelled form is an ``isError``
result that says so, so the model knows nothing was given. The question travels as the era allows
(protocol/asking.py): a round trip for 2026-07-28, a request on the stream for a legacy session.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator

from mcp_app.content.blocks import render_text
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError, error_result
from mcp_app.core.types import ToolDef
from mcp_app.core.versions import is_modern
from mcp_app.handlers import url_forms
from mcp_app.handlers.config import check_keys, check_templates

_KEYS = frozenset({"message", "fields", "text", "sensitive"})
_COMMON = {"type", "title", "description", "default"}
_BY_TYPE = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
}
_FORMATS = {"email", "uri", "date", "date-time"}


def _declined(answer: dict[str, Any]) -> dict[str, Any] | None:
    action = answer.get("action")
    if action == "accept":
        return None
    said = "declined" if action == "decline" else "cancelled"
    return error_result(f"The person {said} the form; nothing was given.")


async def _on_page(ctx: RequestContext, message: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Send the person to the form's page and wait for what they submit there (URL mode).

    The page's link is keyed on the call, so every 2026-07-28 round shows the same one: a retry
    that finds no answers yet (after MCP_URL_FORM_WAIT_SECONDS) asks again, as the spec allows.
    """
    user_id = ctx.user_id if ctx.tenant.auth_mode == "oauth" else None
    token = url_forms.page_token(
        tenant_id=ctx.tenant.id, elicitation_id=ctx.call_id, message=message, fields=fields, user_id=user_id
    )
    url = url_forms.page_url(ctx.tenant.slug, token)
    modern = is_modern(ctx.protocol_version)
    wait = settings.MCP_URL_FORM_WAIT_SECONDS if modern else settings.MCP_URL_FORM_SECONDS
    while True:
        consent = await ctx.elicit_url(f"{message} (Open the page to answer.)", url, ctx.call_id)
        if _declined(consent) is not None:
            return consent
        answers = await url_forms.take(ctx.call_id, wait)
        if answers is not None:
            break
        if not modern:
            raise ToolError("The form's page was not submitted in time; nothing was given.")
    if not modern:
        # 2025-11-25: tell the client the out-of-band part is over (only the client that was asked).
        done = {"elicitationId": ctx.call_id}
        await ctx.emit({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": done})
    return {"action": "accept", "content": answers}


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask the form's question; return the answers, or an error result when the person declined."""
    config = tool.handler_config
    message = render_text(config["message"], dict(arguments))
    sensitive = bool(config.get("sensitive"))
    if sensitive:
        answer = await _on_page(ctx, message, config["fields"])
    else:
        answer = await ctx.elicit(message, config["fields"])
    declined = _declined(answer)
    if declined is not None:
        return declined
    answers = answer.get("content") or {}
    if not isinstance(answers, dict):
        raise ToolError("The form's answers were not an object.")
    problems = sorted(e.message for e in Draft202012Validator(config["fields"]).iter_errors(answers))
    if problems:
        raise ToolError(f"The form's answers do not fit it: {'; '.join(problems)}.")
    if sensitive:
        text = render_text(config["text"], {**arguments, **answers}) if "text" in config else "Received."
        return {"content": [{"type": "text", "text": text}]}
    if "text" in config:
        text = render_text(config["text"], {**arguments, **answers})
    else:
        text = json.dumps(answers, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": answers}


def validate_config(config: dict[str, Any]) -> None:
    """Raise ValidationError unless ``config`` is a form elicitation can carry."""
    check_keys(config, _KEYS, "form")
    check_templates(config, ("message", "text"))
    if "message" not in config:
        raise ValidationError("A form needs 'message': what the person is asked.")
    if "sensitive" in config and not isinstance(config["sensitive"], bool):
        raise ValidationError("'sensitive' must be true or false.")
    validate_fields(config.get("fields"))


def validate_fields(fields: Any) -> None:
    """The restricted schema of an elicitation form (2026-07-28 schema.ts PrimitiveSchemaDefinition)."""
    if not isinstance(fields, dict) or fields.get("type") != "object":
        raise ValidationError(
            '\'fields\' must be a JSON Schema object: {"type": "object", "properties": {...}}.'
        )
    extra = set(fields) - {"type", "properties", "required", "$schema"}
    if extra:
        raise ValidationError(f"'fields' may not have {', '.join(sorted(extra))}: a form is flat.")
    properties = fields.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise ValidationError("'fields' needs at least one property: what the person fills in.")
    for name, spec in properties.items():
        _validate_field(name, spec)
    required = fields.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise ValidationError("'required' must list properties of the form.")


def _validate_field(name: str, spec: Any) -> None:
    if not isinstance(spec, dict):
        raise ValidationError(f"Field {name!r} must be an object.")
    kind = spec.get("type")
    allowed = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        raise ValidationError(
            f"Field {name!r}: a form field is a string, number, integer or boolean (nested objects and "
            "lists cannot be asked)."
        )
    extra = set(spec) - allowed
    if extra:
        raise ValidationError(f"Field {name!r} ({kind}) may not have {', '.join(sorted(extra))}.")
    if "format" in spec and spec["format"] not in _FORMATS:
        raise ValidationError(f"Field {name!r}: format must be one of {', '.join(sorted(_FORMATS))}.")
    if "enum" in spec and not (
        isinstance(spec["enum"], list) and spec["enum"] and all(isinstance(v, str) for v in spec["enum"])
    ):
        raise ValidationError(f"Field {name!r}: 'enum' must be a non-empty list of strings.")
    if "oneOf" in spec and not (
        isinstance(spec["oneOf"], list)
        and spec["oneOf"]
        and all(isinstance(o, dict) and set(o) == {"const", "title"} for o in spec["oneOf"])
    ):
        raise ValidationError(f'Field {name!r}: \'oneOf\' must list {{"const", "title"}} choices.')
    try:
        Draft202012Validator.check_schema(spec)
    except Exception as exc:  # SchemaError: shown to the editor, who wrote it
        raise ValidationError(
            f"Field {name!r} is not a valid schema: {getattr(exc, 'message', exc)}"
        ) from None
