"""The one schema of every definition field (``fields.schema.json``) and its checker, in plain words.

``fields.schema.json`` holds a ``$defs`` entry per JSON field of a definition: content specs, prompt
messages and arguments, icons, ``_meta``, annotations, completions, each handler kind's configuration
and the form fields it asks. The models' ``full_clean`` (mcp_app/definitions), the admin's live check,
the API and the import (the tenant document ``$ref``s these entries) all read it through
``problems``, so they cannot disagree (AMB-143).

Every problem is listed, each as a sentence a tenant can act on: an entry's ``errorMessage`` (one
string, or one per keyword) when the schema gives one, else a sentence made from the failing keyword;
a failed ``oneOf``/``anyOf`` speaks with its best-matching branch (jsonschema's ``best_match``).
What a schema cannot say is code, named in the schema where it applies: ``x-template`` marks a string
the template sandbox must compile (its tags and syntax are the sandbox's, not a pattern's), and the
``date-time`` format is Python's ``fromisoformat`` (what the MCP clients send and the code reads).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, cast

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from mcp_app.content import rendering
from mcp_app.core.errors import ContentError

SCHEMA_PATH = Path(__file__).with_name("fields.schema.json")
SCHEMA_ID = "https://github.com/mcp-platform/schemas/definition-fields/v1"

# How the items of a list read in a message ("message 2"), by the key (or the field) holding the list.
ITEM_LABELS = {
    "messages": "message",
    "prompt_messages": "message",
    "arguments": "argument",
    "prompt_arguments": "argument",
    "icons": "icon",
    "content": "content block",
    "content_specs": "content block",
    "questions": "question",
    "hints": "hint",
    "oneOf": "choice",
    "anyOf": "choice",
}
_A = {
    "string": "a string",
    "object": "a JSON object",
    "array": "a list",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "null": "null",
}


def fail(message: str) -> NoReturn:
    raise ValidationError(message)


@functools.cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@functools.cache
def registry() -> Registry:
    """The definition fields' schema under its $id, for any schema that $refs it (the tenant document)."""
    # Crawled once, with the metaschemas: a `$dynamicRef` into the 2020-12 metaschema (the document's
    # inputSchema) otherwise crawled them anew at each lookup, ~0.1 s a document.
    return SPECIFICATIONS.combine(Registry().with_resource(SCHEMA_ID, DRAFT202012.create_resource(schema()))).crawl()


FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: Any) -> bool:
    if isinstance(value, str):
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def _template(_validator: Any, wanted: Any, instance: Any, _schema: Any) -> Iterator[SchemaError]:
    # A schema says where a template goes; only the sandbox knows whether it compiles (its tags, its
    # syntax, its size limits), so the keyword hands the string to it.
    if not wanted:
        return
    if not isinstance(instance, str):
        yield SchemaError("must be a template (a string).", validator="x-template")
        return
    try:
        rendering.validate(instance)
    except ContentError as exc:
        yield SchemaError(exc.message, validator="x-template")


FieldValidator = validators.extend(Draft202012Validator, {"x-template": _template})


def validator(root: dict[str, Any]) -> Any:
    """A validator of `root` that resolves the fields' $defs and knows x-template and date-time."""
    return FieldValidator(root, registry=registry(), format_checker=FORMATS)


def validator_of(big_schema: dict[str, Any]) -> Any:
    """A validator of a large schema with an `$id`, as `validator` gives, but the schema itself crawled
    once: a validator's root is crawled anew at every anchor it misses, and a `$dynamicRef` into the
    2020-12 metaschema misses in each scope it passes (the tenant document's inputSchemas: ~0.1 s a
    document). The root is then only a `$ref` to it."""
    crawled = registry().with_resource(big_schema["$id"], DRAFT202012.create_resource(big_schema)).crawl()
    return FieldValidator({"$ref": big_schema["$id"]}, registry=crawled, format_checker=FORMATS)


@functools.cache
def _field_validator(name: str) -> Any:
    if name not in schema()["$defs"]:
        raise KeyError(f"No schema for the field {name!r} in {SCHEMA_PATH.name}.")
    return validator({"$ref": f"{SCHEMA_ID}#/$defs/{name}"})


# --- Messages ----------------------------------------------------------------------------------


def location(parts: Sequence[Any], root: str = "") -> str:
    """A path inside a field in words: ["content", 0, "type"] → "'type' of content block 1 of 'content'"."""
    labels: list[str] = []
    key = root
    index = 0
    while index < len(parts):
        part = parts[index]
        if part == "properties" and index + 1 < len(parts) and isinstance(parts[index + 1], str):
            labels.append(f"field {parts[index + 1]!r}")  # a form field, by its name
            key = parts[index + 1]
            index += 2
            continue
        if isinstance(part, int):
            labels.append(f"{ITEM_LABELS.get(str(key), 'item')} {part + 1}")
        else:
            labels.append(repr(str(part)))
            key = part
        index += 1
    return " of ".join(reversed(labels))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _unknown(error: SchemaError) -> list[str]:
    known = set(error.schema.get("properties", {})) if isinstance(error.schema, Mapping) else set()
    return sorted(set(error.instance) - known) if isinstance(error.instance, dict) else []


def _predicates(error: SchemaError) -> list[str]:
    """The failing keyword as what the value must do ("must be a string"), one per problem."""
    # Set on every error a validation reports (the stubs allow jsonschema's "unset" marker too).
    keyword, wanted, value = str(error.validator), cast(Any, error.validator_value), error.instance
    if keyword == "type":
        kinds = wanted if isinstance(wanted, list) else [wanted]
        return [f"must be {' or '.join(_A.get(k) or k for k in kinds)}."]
    if keyword == "required" and isinstance(value, dict):
        return [f"needs {key!r}." for key in wanted if key not in value]
    if keyword == "additionalProperties":
        properties = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        allowed = ", ".join(sorted(properties)) or "none"
        return [f"has unknown keys {', '.join(_unknown(error))}; allowed: {allowed}."]
    if keyword == "enum":
        return [f"must be one of: {', '.join(json.dumps(w) for w in wanted)}."]
    if keyword == "const":
        return [f"must be {json.dumps(wanted)}."]
    simple = {
        "minLength": "must not be empty." if wanted == 1 else f"must be at least {wanted} characters long.",
        "maxLength": f"must be at most {wanted} characters long.",
        "minimum": f"must be at least {wanted}.",
        "maximum": f"must be at most {wanted}.",
        "exclusiveMinimum": f"must be more than {wanted}.",
        "exclusiveMaximum": f"must be less than {wanted}.",
        "minItems": f"must have at least {wanted} item{'s' if wanted != 1 else ''}.",
        "maxItems": f"must have at most {wanted} item{'s' if wanted != 1 else ''}.",
        "uniqueItems": "lists a value twice.",
        "minProperties": "must not be empty.",
        "format": f"must be a valid {wanted}.",
        "pattern": "is not in the expected form.",
        "not": "is not allowed here.",
    }
    return [simple.get(keyword, error.message)]


def _custom(error: SchemaError) -> list[str] | None:
    """The entry's own errorMessage for this keyword (a dict by keyword, or one string for all)."""
    given = error.schema.get("errorMessage") if isinstance(error.schema, dict) else None
    if isinstance(given, dict):
        given = given.get(str(error.validator))
    if isinstance(given, dict) and error.validator == "required" and isinstance(error.instance, dict):
        # One message per missing key, those without their own falling back to the plain one.
        return [
            given.get(k, f"{{up0}} needs {k!r}.") for k in cast(Any, error.validator_value) if k not in error.instance
        ]
    return [given] if isinstance(given, str) else None


def _fill(template: str, error: SchemaError, parts: list[Any], root: str, subject: str) -> str:
    def where(up: int) -> str:
        return location(parts[: len(parts) - up], root) if up <= len(parts) else ""

    def key(up: int) -> str:
        return repr(parts[-1 - up]) if up < len(parts) else ""

    text = template
    for up in range(5):
        if f"{{up{up}}}" in text:
            text = text.replace(f"{{up{up}}}", where(up) or subject)
        text = text.replace(f"{{key{up}}}", key(up))
    text = text.replace(
        "{value}", repr(error.instance) if not isinstance(error.instance, dict | list) else "it"
    )
    text = text.replace("{keys}", ", ".join(_unknown(error)))
    text = text.replace("{at}", f"{where(0)}: " if where(0) else "")
    return _capital(text)


def explain(error: SchemaError, skip: int = 0, root: str = "", subject: str = "") -> list[str]:
    """The sentences one error stands for; `skip` leading path parts are not part of the field."""
    if error.validator in ("oneOf", "anyOf") and error.context and _custom(error) is None:
        return explain(best_match(error.context), skip, root, subject)
    parts = list(error.absolute_path)[skip:]
    custom = _custom(error)
    if custom is not None:
        return [_fill(message, error, parts, root, subject or "The value") for message in custom]
    where = location(parts, root)
    if "propertyNames" in error.relative_schema_path:
        where = f"the key {error.instance!r} of {where}" if where else f"the key {error.instance!r}"
    subject = where or subject or "The value"
    # A predicate ("must be a string") follows its subject; a sentence of its own (the sandbox's
    # "Template syntax error: ...") follows a colon.
    return [
        _capital(f"{subject}: {text}" if text[:1].isupper() else f"{subject} {text}")
        for text in _predicates(error)
    ]


def _order(error: SchemaError) -> list[str]:
    return [f"{p:08d}" if isinstance(p, int) else str(p) for p in error.absolute_path]


def problems(name: str, value: Any) -> list[str]:
    """Every way `value` breaks the schema of the field `name`, in plain words (none: it fits)."""
    entry = schema()["$defs"][name]
    subject = entry.get("title", "The value") if isinstance(entry, dict) else "The value"
    found: list[str] = []
    for error in sorted(_field_validator(name).iter_errors(value), key=_order):
        for message in explain(error, root=name, subject=subject):
            if message not in found:
                found.append(message)
    return found


def check(name: str, value: Any) -> None:
    """Raise ValidationError listing every problem of `value` as the field `name`."""
    found = problems(name, value)
    if found:
        raise ValidationError(found)
