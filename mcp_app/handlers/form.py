"""The ``form`` kind: ask the person to fill in a form (elicitation), no code.

Tool ``handler_config``:

- ``"message"``: what the person is asked, a template over the arguments.
- ``"fields"``: the form, the flat JSON Schema elicitation allows (``requestedSchema``): an object
  whose properties are strings (``minLength``, ``maxLength``, ``format`` email/uri/date/date-time),
  single choices (``enum``, with the legacy ``enumNames`` labels or not, or ``oneOf`` of
  ``{"const", "title"}``), multiple choices (``"type": "array"`` whose ``items`` are
  ``{"type": "string", "enum": [...]}`` or ``{"anyOf": [{"const", "title"}, ...]}``, with ``minItems``
  and ``maxItems``), numbers or integers (``minimum``, ``maximum``) or booleans, each with an optional
  ``title``, ``description`` and ``default`` (one of its own answers); ``required`` lists the ones
  that must be filled (AMB-120). A 2025-06-18 client gets titled choices as ``enumNames`` and cannot
  be asked a multiple choice (AMB-121).
- ``"questions"`` (instead of ``"message"`` and ``"fields"``): several named questions, each
  ``{"name", "message", "fields"}``, asked together: in one round on 2026-07-28, one after another on
  a legacy session (AMB-123). The answers of all are merged (a field belongs to one question).
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
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator

from mcp_app.content import rendering
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError, error_result
from mcp_app.core.types import ToolDef
from mcp_app.core.versions import is_modern
from mcp_app.handlers import url_forms
from mcp_app.handlers.config import check_keys, check_templates

_KEYS = frozenset({"message", "fields", "questions", "text", "sensitive"})
MAX_QUESTIONS = 10
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# The server's own question names (protocol/approval.py asks "approval").
RESERVED_NAMES = frozenset({"approval"})
_COMMON = {"type", "title", "description", "default"}
# 2025-11-25 PrimitiveSchemaDefinition: StringSchema and the single choices (enum, oneOf, the legacy
# enum + enumNames), NumberSchema, BooleanSchema, and the multiple choices (type array).
_BY_TYPE = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"items", "minItems", "maxItems"},
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


def questions_of(tool: ToolDef) -> list[dict[str, Any]]:
    """The form's questions: its `questions`, or the one its `message` and `fields` make (named by the tool)."""
    config = tool.handler_config
    if "questions" in config:
        return list(config["questions"])
    return [{"name": tool.name, "message": config["message"], "fields": config["fields"]}]


def checked_answers(fields: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """A question's accepted answers, checked against its own fields (a value outside a choice fails)."""
    answers = answer.get("content") or {}
    if not isinstance(answers, dict):
        raise ToolError("The form's answers were not an object.")
    problems = sorted(e.message for e in Draft202012Validator(fields).iter_errors(answers))
    if problems:
        raise ToolError(f"The form's answers do not fit it: {'; '.join(problems)}.")
    return answers


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask the form's questions; return the answers, or an error result when the person declined."""
    config = tool.handler_config
    if config.get("sensitive"):
        message = await rendering.text(ctx, config["message"], dict(arguments))
        answer = await _on_page(ctx, message, config["fields"])
        declined = _declined(answer)
        if declined is not None:
            return declined
        answers = checked_answers(config["fields"], answer)
        text = (
            await rendering.text(ctx, config["text"], {**arguments, **answers})
            if "text" in config
            else "Received."
        )
        return {"content": [{"type": "text", "text": text}]}
    questions = questions_of(tool)
    # Asked together (AMB-122): one 2026-07-28 round for all, one after another on a legacy session.
    requests = {
        q["name"]: {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": await rendering.text(ctx, q["message"], dict(arguments)),
                "requestedSchema": q["fields"],
            },
        }
        for q in questions
    }
    results = await ctx.ask_together(requests)
    answers: dict[str, Any] = {}
    for question in questions:
        declined = _declined(results.get(question["name"]) or {"action": "cancel"})
        if declined is not None:
            return declined
        answers.update(checked_answers(question["fields"], results[question["name"]]))
    if "text" in config:
        text = await rendering.text(ctx, config["text"], {**arguments, **answers})
    else:
        text = json.dumps(answers, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": answers}


def validate_config(config: dict[str, Any]) -> None:
    """Raise ValidationError unless ``config`` is a form elicitation can carry."""
    check_keys(config, _KEYS, "form")
    check_templates(config, ("message", "text"))
    if "sensitive" in config and not isinstance(config["sensitive"], bool):
        raise ValidationError("'sensitive' must be true or false.")
    if "questions" in config:
        if "message" in config or "fields" in config:
            raise ValidationError(
                "A form has either 'questions' or one 'message' with its 'fields', not both."
            )
        if config.get("sensitive"):
            raise ValidationError("A sensitive form has one question: its 'message' and 'fields'.")
        _validate_questions(config["questions"])
        return
    if "message" not in config:
        raise ValidationError("A form needs 'message': what the person is asked.")
    validate_fields(config.get("fields"))


def _validate_questions(questions: Any) -> None:
    """Several named questions, asked together (AMB-123)."""
    if not isinstance(questions, list) or not 1 <= len(questions) <= MAX_QUESTIONS:
        raise ValidationError(f"'questions' must be a list of 1 to {MAX_QUESTIONS} questions.")
    names: set[str] = set()
    owners: dict[str, str] = {}
    for index, question in enumerate(questions):
        where = f"questions[{index}]"
        if not isinstance(question, dict) or set(question) != {"name", "message", "fields"}:
            raise ValidationError(f'{where} must be {{"name", "message", "fields"}}.')
        name = question["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValidationError(
                f"{where}: 'name' must be 1 to 64 letters, digits, '_', '-' or '.' (the client sees it)."
            )
        if name in names or name in RESERVED_NAMES:
            raise ValidationError(f"{where}: the name {name!r} is taken.")
        names.add(name)
        check_templates(question, ("message",))
        if "message" not in question or not isinstance(question["message"], str):
            raise ValidationError(f"{where}: 'message' must be a template.")
        try:
            validate_fields(question["fields"])
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc.messages[0]}") from None
        for field_name in question["fields"]["properties"]:
            if field_name in owners:
                raise ValidationError(
                    f"{where}: field {field_name!r} is also asked by {owners[field_name]!r}; the answers "
                    "are merged, so each field belongs to one question."
                )
            owners[field_name] = name


def validate_fields(fields: Any) -> None:
    """The restricted schema of an elicitation form: 2025-11-25's PrimitiveSchemaDefinition (AMB-120)."""
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


def choices_of(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """A choice field's (value, label) pairs, whichever of the spec's shapes it is written in; [] else."""
    items = spec.get("items") if spec.get("type") == "array" else spec
    if not isinstance(items, dict):
        return []
    if isinstance(items.get("enum"), list):
        names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else items["enum"]
        return [(str(v), str(n)) for v, n in zip(items["enum"], names, strict=False)]
    titled = items.get("oneOf") if spec.get("type") != "array" else items.get("anyOf")
    if isinstance(titled, list):
        return [(str(o.get("const")), str(o.get("title"))) for o in titled if isinstance(o, dict)]
    return []


def _field_error(name: str, problem: str) -> ValidationError:
    return ValidationError(f"Field {name!r}: {problem}")


def _strings(name: str, values: Any, what: str) -> list[str]:
    if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
        raise _field_error(name, f"{what} must be a non-empty list of strings.")
    if len(set(values)) != len(values):
        raise _field_error(name, f"{what} lists a value twice.")
    return values


def _titled(name: str, options: Any, key: str) -> list[str]:
    """The values of a titled choice: a list of {"const", "title"} strings."""
    if not (
        isinstance(options, list)
        and options
        and all(
            isinstance(o, dict)
            and set(o) == {"const", "title"}
            and isinstance(o["const"], str)
            and isinstance(o["title"], str)
            for o in options
        )
    ):
        raise _field_error(name, f'{key!r} must list {{"const": "<value>", "title": "<label>"}} choices.')
    return _strings(name, [o["const"] for o in options], f"{key!r}")


def _count(name: str, spec: dict[str, Any], low: str, high: str) -> None:
    """Non-negative integer bounds, the low one not above the high one."""
    for key in (low, high):
        value = spec.get(key)
        if key in spec and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise _field_error(name, f"{key!r} must be a whole number, 0 or more.")
    if low in spec and high in spec and spec[low] > spec[high]:
        raise _field_error(name, f"{low!r} is above {high!r}.")


def _single_choice(name: str, spec: dict[str, Any]) -> list[str] | None:
    """The values a string field may take, or None for free text."""
    if "enum" in spec and "oneOf" in spec:
        raise _field_error(name, "give the choices as 'enum' or as 'oneOf', not both.")
    if "enumNames" in spec and "enum" not in spec:
        raise _field_error(name, "'enumNames' labels the values of 'enum'.")
    if "enum" in spec:
        values = _strings(name, spec["enum"], "'enum'")
        if "enumNames" in spec:
            labels = _strings(name, spec["enumNames"], "'enumNames'") if spec["enumNames"] else []
            if len(labels) != len(values):
                raise _field_error(name, "'enumNames' needs one name for each value of 'enum'.")
        return values
    if "oneOf" in spec:
        return _titled(name, spec["oneOf"], "oneOf")
    return None


def _multiple_choice(name: str, spec: dict[str, Any]) -> list[str]:
    """The values a multiple choice may pick (items.enum, or items.anyOf with titles)."""
    items = spec.get("items")
    if not isinstance(items, dict):
        raise _field_error(name, "a list field is a multiple choice: 'items' lists its choices.")
    if "enum" in items:
        if set(items) != {"type", "enum"} or items["type"] != "string":
            raise _field_error(
                name, '\'items\' must be {"type": "string", "enum": [...]} or {"anyOf": [...]}.'
            )
        values = _strings(name, items["enum"], "'items.enum'")
    elif "anyOf" in items and set(items) <= {"anyOf", "type"} and items.get("type", "string") == "string":
        values = _titled(name, items["anyOf"], "items.anyOf")
    else:
        raise _field_error(name, '\'items\' must be {"type": "string", "enum": [...]} or {"anyOf": [...]}.')
    _count(name, spec, "minItems", "maxItems")
    if spec.get("minItems", 0) > len(values):
        raise _field_error(name, "'minItems' is more than there are choices.")
    return values


def _check_default(name: str, spec: dict[str, Any], kind: str, choices: list[str] | None) -> None:
    """A default must be an answer the field itself would accept."""
    if "default" not in spec:
        return
    default = spec["default"]
    if kind == "array":
        ok = isinstance(default, list) and all(v in (choices or []) for v in default)
        ok = ok and len(set(default)) == len(default)
        ok = ok and spec.get("minItems", 0) <= len(default) <= spec.get("maxItems", len(default))
        if not ok:
            raise _field_error(name, "'default' must be a list of its choices, as many as it allows.")
        return
    problems = list(
        Draft202012Validator({k: v for k, v in spec.items() if k != "default"}).iter_errors(default)
    )
    if problems or (choices is not None and default not in choices):
        raise _field_error(name, f"'default' {default!r} is not an answer this field accepts.")


def _validate_field(name: str, spec: Any) -> None:
    if not isinstance(spec, dict):
        raise ValidationError(f"Field {name!r} must be an object.")
    kind = spec.get("type")
    allowed = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        raise ValidationError(
            f"Field {name!r}: a form field is a string, number, integer, boolean or a multiple choice "
            "(a list of strings from 'items'); nested objects cannot be asked."
        )
    extra = set(spec) - allowed
    if extra:
        raise ValidationError(f"Field {name!r} ({kind}) may not have {', '.join(sorted(extra))}.")
    for key in ("title", "description"):
        if key in spec and not isinstance(spec[key], str):
            raise _field_error(name, f"{key!r} must be a string.")
    if "format" in spec and spec["format"] not in _FORMATS:
        raise ValidationError(f"Field {name!r}: format must be one of {', '.join(sorted(_FORMATS))}.")
    choices = None
    if kind == "string":
        choices = _single_choice(name, spec)
        _count(name, spec, "minLength", "maxLength")
    elif kind == "array":
        choices = _multiple_choice(name, spec)
    elif kind in ("number", "integer"):
        for key in ("minimum", "maximum"):
            if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], int | float)):
                raise _field_error(name, f"{key!r} must be a number.")
        if "minimum" in spec and "maximum" in spec and spec["minimum"] > spec["maximum"]:
            raise _field_error(name, "'minimum' is above 'maximum'.")
    try:
        Draft202012Validator.check_schema(spec)
    except Exception as exc:  # SchemaError: shown to the editor, who wrote it
        raise ValidationError(
            f"Field {name!r} is not a valid schema: {getattr(exc, 'message', exc)}"
        ) from None
    _check_default(name, spec, kind, choices)
