"""Checks on tenant-defined MCP definitions, shared by the models' clean(), the admin and the API.

Each ``validate_*`` function raises ``django.core.exceptions.ValidationError`` with messages a
tenant can act on; the ``clean_*`` functions check a whole row and raise a field → errors dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from uritemplate import URITemplate

from mcp_app.content.blocks import validate_spec
from mcp_app.content.fields import (
    SCHEME,
    fail,
    is_str_list,
    validate_annotations,
    validate_icons,
    validate_meta,
    validate_mime_type,
    validate_resource_uri,
)
from mcp_app.content.schema_refs import validate_local_refs
from mcp_app.core.mcp_headers import invalid_x_mcp_header
from mcp_app.handlers import registry
from mcpsite import nesting

# AMB-17: a schema without "$schema" is checked (and later validated) as Draft 2020-12.
DEFAULT_SCHEMA_DIALECT = Draft202012Validator

TOOL_ANNOTATION_TYPES: dict[str, type] = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
ROLES = frozenset({"user", "assistant"})
PROMPT_ARGUMENT_KEYS = frozenset({"name", "title", "description", "required", "completions", "ask"})

# RFC 6570 §2: an expression is an optional operator and a comma-separated list of varspecs.
_VARSPEC = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(?::[1-9][0-9]{0,3}|\*)?"
_EXPRESSION = re.compile(rf"^[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*$")
_TEMPLATE_LITERAL_FORBIDDEN = re.compile(r"[\s\"'<>\\^`|]")


def _collect(checks: Iterable[tuple[str, Callable[[], None]]]) -> None:
    """Run each (field, check) and raise every failure at once as a field → errors dict."""
    errors: dict[str, list[str]] = {}
    for field, check in checks:
        try:
            check()
        except ValidationError as exc:
            errors.setdefault(field, []).extend(exc.messages)
    if errors:
        raise ValidationError(errors)


# --- JSON Schema -------------------------------------------------------------------------------


def schema_validator_class(schema: dict[str, Any]) -> type:
    """Return the jsonschema validator class for the schema's $schema (default Draft 2020-12)."""
    cls = validator_for(schema, default=None)
    if cls is None:
        if "$schema" in schema:
            fail(f"Unsupported $schema {schema['$schema']!r}; use a JSON Schema draft URI (e.g. 2020-12).")
        return DEFAULT_SCHEMA_DIALECT
    return cls


def validate_object_schema(schema: Any, label: str = "Schema", object_root: bool = True) -> None:
    """Check a tool input/output schema: a valid JSON Schema, whose root has type "object" if asked.

    Input schemas always need the object root; an output schema may be any schema (2026-07-28), the
    tool then being offered to 2026-07-28 clients only (core.types.offered_to_legacy).
    """
    if not isinstance(schema, dict):
        fail(f"{label} must be a JSON object (a JSON Schema), not {type(schema).__name__}.")
    cls = schema_validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        fail(f"{label} is not a valid JSON Schema at {where}: {exc.message}")
    validate_local_refs(schema, label)
    if object_root and schema.get("type") != "object":
        fail(f'{label} must have "type": "object" at the root.')


def validate_x_mcp_headers(schema: Any, label: str = "Input schema") -> None:
    """Check the schema's x-mcp-header annotations (2026-07-28 streamable-http, "Custom Headers").

    A conforming client drops a tool whose annotations break the rules from tools/list, so a tenant
    would publish a tool nobody can call; refuse it here, naming the offending location.
    """
    reason = invalid_x_mcp_header(schema)
    if reason is not None:
        fail(f"{label}: {reason}.")


# --- Shared metadata ---------------------------------------------------------------------------


def validate_tool_annotations(annotations: Any) -> None:
    """Check ToolAnnotations: only the five known keys, title a string, *Hint booleans."""
    if not isinstance(annotations, dict):
        fail("Annotations must be a JSON object.")
    for key, value in annotations.items():
        expected = TOOL_ANNOTATION_TYPES.get(key)
        if expected is None:
            fail(f"Unknown annotation {key!r}; allowed: {', '.join(TOOL_ANNOTATION_TYPES)}.")
        if not isinstance(value, expected):
            kind = "a string" if expected is str else "true or false"
            fail(f"Annotation {key!r} must be {kind}.")


# --- Resources ---------------------------------------------------------------------------------


def uri_template_variables(template: str) -> list[str]:
    """Return the variable names of an RFC 6570 template, in order."""
    return list(URITemplate(template).variable_names)


def validate_uri_template(template: Any) -> None:
    """Check an RFC 6570 URI template with an absolute scheme and at least one variable."""
    if not isinstance(template, str) or not template:
        fail("A URI template is required.")
    depth = 0
    expression = ""
    literal = ""
    for char in template:
        if char == "{":
            if depth:
                fail("Nested '{' in URI template.")
            depth, expression = 1, ""
        elif char == "}":
            if not depth:
                fail("Unmatched '}' in URI template.")
            if not _EXPRESSION.match(expression):
                fail(f"'{{{expression}}}' is not a valid RFC 6570 expression.")
            depth = 0
        elif depth:
            expression += char
        else:
            literal += char
    if depth:
        fail("Unclosed '{' in URI template.")
    if _TEMPLATE_LITERAL_FORBIDDEN.search(literal):
        fail(
            "A URI template must not contain spaces, quotes, '<', '>', '\\', '^', '`' or '|' outside expressions."
        )
    scheme, sep, _rest = template.partition(":")
    if not sep or not SCHEME.match(scheme):
        fail(f"{template!r} must start with a URI scheme such as 'myapp://'.")
    if not uri_template_variables(template):
        fail("A URI template needs at least one {variable}; use a plain resource otherwise.")


def validate_template_completions(template: str, completions: Any) -> None:
    """Check completions name only the template's variables (values: see validate_completion_values)."""
    if not isinstance(completions, dict):
        fail('Completions must be a JSON object such as {"id": ["1", "2"]}.')
    try:
        variables = set(uri_template_variables(template))
    except Exception:  # the template's own error is reported on its field
        return
    for name, values in completions.items():
        if name not in variables:
            fail(
                f"Completions for {name!r}, but the template has no such variable (has: {sorted(variables)})."
            )
        validate_completion_values(values, name, variables)


# --- Completions -------------------------------------------------------------------------------


def validate_completion_values(config: Any, name: str, others: set[str]) -> None:
    """Check configured completions: a list of strings, or values depending on another argument.

    The dependent shape is {"argument": other, "values": {other's value: [strings]}, "default": [strings]}.
    """
    if is_str_list(config):
        return
    if not isinstance(config, dict):
        fail(f"Completions for {name!r} must be a list of strings or an object with 'argument' and 'values'.")
    unknown = sorted(set(config) - {"argument", "values", "default"})
    if unknown:
        fail(f"Completions for {name!r} have unknown keys {unknown}; allowed: argument, values, default.")
    other = config.get("argument")
    if other not in others or other == name:
        fail(
            f"Completions for {name!r}: 'argument' must name another of {sorted(others - {name}) or 'none'}."
        )
    values = config.get("values", {})
    if not isinstance(values, dict) or not all(is_str_list(v) for v in values.values()):
        fail(f"Completions for {name!r}: 'values' must map each value of {other!r} to a list of strings.")
    if "default" in config and not is_str_list(config["default"]):
        fail(f"Completions for {name!r}: 'default' must be a list of strings.")


# --- Prompts -----------------------------------------------------------------------------------


def validate_prompt_arguments(arguments: Any) -> None:
    """Check prompt arguments: a list of {name, title?, description?, required?, ask?, completions?}."""
    if not isinstance(arguments, list):
        fail("Arguments must be a JSON list of argument objects.")
    seen: set[str] = set()
    for index, argument in enumerate(arguments):
        where = f"Argument {index + 1}"
        if not isinstance(argument, dict):
            fail(f'{where} must be an object such as {{"name": "code", "required": true}}.')
        unknown = sorted(set(argument) - PROMPT_ARGUMENT_KEYS)
        if unknown:
            fail(f"{where} has unknown keys {unknown}; allowed: {', '.join(sorted(PROMPT_ARGUMENT_KEYS))}.")
        name = argument.get("name")
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            fail(f"{where} needs a 'name' of letters, digits and '_' (usable in the message template).")
        if name in seen:
            fail(f"Argument {name!r} is defined twice.")
        seen.add(name)
        for key in ("title", "description"):
            if key in argument and not isinstance(argument[key], str):
                fail(f"Argument {name!r}: '{key}' must be a string.")
        for key in ("required", "ask"):
            if key in argument and not isinstance(argument[key], bool):
                fail(f"Argument {name!r}: '{key}' must be true or false.")
    names = {argument["name"] for argument in arguments}
    for argument in arguments:
        if "completions" in argument:
            validate_completion_values(argument["completions"], argument["name"], names)


def validate_prompt_messages(messages: Any) -> None:
    """Check prompt messages: a list of {role: user|assistant, content: content spec}."""
    if not isinstance(messages, list) or not messages:
        fail('Messages must be a non-empty JSON list of {"role": ..., "content": {...}}.')
    for index, message in enumerate(messages):
        where = f"Message {index + 1}"
        if not isinstance(message, dict):
            fail(f"{where} must be an object with 'role' and 'content'.")
        unknown = sorted(set(message) - {"role", "content"})
        if unknown:
            fail(f"{where} has unknown keys {unknown}; allowed: role, content.")
        if message.get("role") not in ROLES:
            fail(f'{where}: \'role\' must be "user" or "assistant".')
        validate_spec(message.get("content"), f"{where} content")


# --- Tool handlers -----------------------------------------------------------------------------


def validate_handler(kind: str, config: Any) -> None:
    """Check a tool's handler kind is registered and its settings are valid for it."""
    registry.validate_config(kind, config)


def validate_template_handler(kind: str, config: Any) -> None:
    """Check a resource template's handler kind can produce contents and its settings are valid."""
    registry.validate_template_config(kind, config)


# --- Whole rows --------------------------------------------------------------------------------


def validate_depth(value: Any) -> None:
    """Refuse JSON nested past a definition's share of the one limit (AMB-115), room left for its frames."""
    limit = nesting.definition_limit()
    if nesting.depth_exceeds(value, limit):
        fail(f"Nested deeper than {limit} levels (MCP_MAX_JSON_DEPTH less {nesting.FRAME}).")


def _depth_checks(obj: Any) -> list[tuple[str, Callable[[], None]]]:
    fields = [f.name for f in obj._meta.concrete_fields if isinstance(f, models.JSONField)]
    return [(name, lambda name=name: validate_depth(getattr(obj, name))) for name in fields]


def _common_checks(obj: Any) -> list[tuple[str, Callable[[], None]]]:
    return [
        *_depth_checks(obj),
        ("icons", lambda: validate_icons(obj.icons)),
        ("meta", lambda: validate_meta(obj.meta)),
    ]


def clean_tool(tool: Any) -> None:
    """Validate a Tool row's JSON fields and handler (field → errors)."""
    checks = [
        ("input_schema", lambda: validate_object_schema(tool.input_schema, "Input schema")),
        ("input_schema", lambda: validate_x_mcp_headers(tool.input_schema)),
        ("annotations", lambda: validate_tool_annotations(tool.annotations)),
        ("handler_config", lambda: validate_handler(tool.handler, tool.handler_config)),
        *_common_checks(tool),
    ]
    if tool.handler == "form" and tool.execution == "background":
        checks.append(
            (
                "execution",
                lambda: fail("A form asks the person, so it runs in the server process, not on a worker."),
            )
        )
    if tool.output_schema is not None:
        checks.append(
            (
                "output_schema",
                lambda: validate_object_schema(tool.output_schema, "Output schema", object_root=False),
            )
        )
        config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
        if tool.handler == "form" and config.get("sensitive") is True:
            checks.append(
                (
                    "output_schema",
                    lambda: fail(
                        "A sensitive form never returns its answers as structured output: remove the "
                        "output schema (its 'text' may name the answers the model should see)."
                    ),
                )
            )
    _collect(checks)


def clean_prompt(prompt: Any) -> None:
    """Validate a Prompt row's arguments, messages, icons and _meta."""
    _collect(
        [
            ("arguments", lambda: validate_prompt_arguments(prompt.arguments)),
            ("messages", lambda: validate_prompt_messages(prompt.messages)),
            *_common_checks(prompt),
        ]
    )


def clean_resource(resource: Any) -> None:
    """Validate a Resource row's URI, MIME type, annotations, icons and _meta."""
    _collect(
        [
            ("uri", lambda: validate_resource_uri(resource.uri)),
            ("mime_type", lambda: validate_mime_type(resource.mime_type)),
            ("annotations", lambda: validate_annotations(resource.annotations)),
            *_common_checks(resource),
        ]
    )


def clean_resource_template(template: Any) -> None:
    """Validate a ResourceTemplate row's URI template, completions, annotations, icons and _meta."""
    _collect(
        [
            ("uri_template", lambda: validate_uri_template(template.uri_template)),
            (
                "completions",
                lambda: validate_template_completions(template.uri_template, template.completions),
            ),
            ("handler_config", lambda: validate_template_handler(template.handler, template.handler_config)),
            ("mime_type", lambda: validate_mime_type(template.mime_type)),
            ("annotations", lambda: validate_annotations(template.annotations)),
            *_common_checks(template),
        ]
    )
