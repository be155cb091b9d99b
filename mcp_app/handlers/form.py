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
from typing import Any

from jsonschema import Draft202012Validator

from mcp_app.content import fields as schema_fields
from mcp_app.content import rendering
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError, error_result
from mcp_app.core.types import ToolDef
from mcp_app.handlers import url_forms

# The server's own question names (protocol/approval.py asks "approval").
RESERVED_NAMES = frozenset({"approval"})


def _declined(answer: dict[str, Any]) -> dict[str, Any] | None:
    action = answer.get("action")
    if action == "accept":
        return None
    said = "declined" if action == "decline" else "cancelled"
    return error_result(f"The person {said} the form; nothing was given.")


async def _on_page(ctx: RequestContext, message: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Send the person to the form's page and wait for what they submit there (URL mode)."""
    user_id = ctx.user_id if ctx.tenant.auth_mode == "oauth" else None
    token = url_forms.page_token(
        tenant_id=ctx.tenant.id, elicitation_id=ctx.call_id, message=message, fields=fields, user_id=user_id
    )
    url = url_forms.page_url(ctx.tenant.slug, token)
    late = "The form's page was not submitted in time; nothing was given."
    return await url_forms.send_and_wait(ctx, f"{message} (Open the page to answer.)", url, late)


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
    answers = {}
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


def config_problems(config: dict[str, Any]) -> list[str]:
    """What the ``handler.form`` schema cannot say: the questions' names differ, a field has one owner.

    The shapes (keys, templates, the flat form, 1 to 10 questions) are the schema's; these relate one
    question to another, and the fields of each get ``fields_rules``.
    """
    questions = config.get("questions")
    if not isinstance(questions, list):
        return fields_rules(config.get("fields"))
    found: list[str] = []
    names: set[str] = set()
    owners: dict[str, str] = {}
    for index, question in enumerate(questions):
        if not isinstance(question, dict):
            continue
        where = f"Question {index + 1}"
        name = question.get("name")
        if isinstance(name, str) and (name in names or name in RESERVED_NAMES):
            found.append(f"{where}: the name {name!r} is taken.")
        names.add(str(name))
        found += [f"{where}: {m}" for m in fields_rules(question.get("fields"))]
        properties = (
            question.get("fields", {}).get("properties") if isinstance(question.get("fields"), dict) else None
        )
        for field_name in properties if isinstance(properties, dict) else ():
            if field_name in owners:
                found.append(
                    f"{where}: field {field_name!r} is also asked by {owners[field_name]!r}; the answers "
                    "are merged, so each field belongs to one question."
                )
            owners.setdefault(field_name, str(name))
    return found


def fields_problems(fields: Any) -> list[str]:
    """Every problem of an elicitation form: 2025-11-25's PrimitiveSchemaDefinition (AMB-120).

    The ``form_fields`` schema, then ``fields_rules``; an endpoint's question (http_stream) is held to
    the same.
    """
    return schema_fields.problems("form_fields", fields) + fields_rules(fields)


def fields_rules(fields: Any) -> list[str]:
    """By hand, what relates one keyword of a form to another (a schema checks each keyword alone):
    'required' names properties, a low bound is not above its high one, labels match values, a
    default is an answer the field accepts, and the field is a JSON Schema jsonschema can use."""
    if not isinstance(fields, dict) or not isinstance(fields.get("properties"), dict):
        return []
    properties = fields["properties"]
    found: list[str] = []
    required = fields.get("required", [])
    if isinstance(required, list) and any(r not in properties for r in required):
        found.append("'required' must list properties of the form.")
    for name, spec in properties.items():
        if isinstance(spec, dict):
            found += [f"Field {name!r}: {m}" for m in _field_rules(spec)]
    return found


def choices_of(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """A choice field's (value, label) pairs, whichever of the spec's shapes it is written in; [] else."""
    items = spec.get("items") if spec.get("type") == "array" else spec
    if not isinstance(items, dict):
        return []
    if isinstance(items.get("enum"), list):
        names = found if isinstance(found := spec.get("enumNames"), list) else items["enum"]
        return [(str(v), str(n)) for v, n in zip(items["enum"], names, strict=False)]
    titled = items.get("oneOf") if spec.get("type") != "array" else items.get("anyOf")
    if isinstance(titled, list):
        return [(str(o.get("const")), str(o.get("title"))) for o in titled if isinstance(o, dict)]
    return []


def _choices(spec: dict[str, Any]) -> list[str] | None:
    """The values a choice field may take (None: free text or a number)."""
    if spec.get("type") not in ("string", "array"):
        return None
    pairs = choices_of(spec)
    return [value for value, _label in pairs] if pairs or spec.get("type") == "array" else None


def _field_rules(spec: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for low, high in (("minLength", "maxLength"), ("minItems", "maxItems"), ("minimum", "maximum")):
        least, most = spec.get(low), spec.get(high)
        if (
            isinstance(least, int | float)
            and isinstance(most, int | float)
            and not isinstance(least, bool)
            and not isinstance(most, bool)
            and least > most
        ):
            found.append(f"{low!r} is above {high!r}.")
    enum, names = spec.get("enum"), spec.get("enumNames")
    if isinstance(enum, list) and isinstance(names, list) and names and len(names) != len(enum):
        found.append("'enumNames' needs one name for each value of 'enum'.")
    choices = _choices(spec)
    minimum = spec.get("minItems", 0)
    if spec.get("type") == "array" and isinstance(minimum, int) and choices and minimum > len(choices):
        found.append("'minItems' is more than there are choices.")
    try:
        Draft202012Validator.check_schema(spec)
    except Exception as exc:  # SchemaError: shown to the editor, who wrote it
        return [*found, f"is not a valid schema: {getattr(exc, 'message', exc)}"]
    if "default" in spec and not found:
        found += _default_rule(spec, choices)
    return found


def _default_rule(spec: dict[str, Any], choices: list[str] | None) -> list[str]:
    """A default must be an answer the field itself would accept."""
    default = spec["default"]
    if spec.get("type") == "array":
        ok = isinstance(default, list) and all(v in (choices or []) for v in default)
        ok = ok and len(set(map(str, default))) == len(default)
        ok = ok and spec.get("minItems", 0) <= len(default) <= spec.get("maxItems", len(default))
        return [] if ok else ["'default' must be a list of its choices, as many as it allows."]
    problems = list(
        Draft202012Validator({k: v for k, v in spec.items() if k != "default"}).iter_errors(default)
    )
    if problems or (choices is not None and default not in choices):
        return [f"'default' {default!r} is not an answer this field accepts."]
    return []
