"""Checks on tenant-defined MCP definitions, shared by the models' clean(), the admin and the API.

Each ``validate_*`` function raises ``django.core.exceptions.ValidationError`` with messages a
tenant can act on; the ``clean_*`` functions check a whole row and raise a field → errors dict.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from uritemplate import URITemplate

from mcp_app.content.blocks import validate_template
from mcp_app.core.errors import ContentError
from mcp_app.handlers import registry

# AMB-17: a schema without "$schema" is checked (and later validated) as Draft 2020-12.
DEFAULT_SCHEMA_DIALECT = Draft202012Validator

TOOL_ANNOTATION_TYPES: dict[str, type] = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
ICON_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})
ICON_THEMES = frozenset({"light", "dark"})
ROLES = frozenset({"user", "assistant"})
AUDIENCES = frozenset({"user", "assistant"})
CONTENT_TYPES = ("text", "image", "audio", "resource", "resource_link")
PROMPT_ARGUMENT_KEYS = frozenset({"name", "title", "description", "required", "completions"})

# BP-12: `_meta` key = optional prefix (dot-separated labels + "/") and a name.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY = re.compile(
    rf"^(?:(?P<prefix>{_LABEL}(?:\.{_LABEL})*)/)?(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$"
)
RESERVED_META_LABELS = frozenset({"modelcontextprotocol", "mcp"})

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
_MIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:\s*;.*)?$")
_ICON_SIZE = re.compile(r"^(?:any|[1-9][0-9]*x[1-9][0-9]*)$")
# RFC 6570 §2: an expression is an optional operator and a comma-separated list of varspecs.
_VARSPEC = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(?::[1-9][0-9]{0,3}|\*)?"
_EXPRESSION = re.compile(rf"^[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*$")
_TEMPLATE_LITERAL_FORBIDDEN = re.compile(r"[\s\"'<>\\^`|]")


def _fail(message: str) -> None:
    raise ValidationError(message)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


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
            _fail(f"Unsupported $schema {schema['$schema']!r}; use a JSON Schema draft URI (e.g. 2020-12).")
        return DEFAULT_SCHEMA_DIALECT
    return cls


def validate_object_schema(schema: Any, label: str = "Schema") -> None:
    """Check a tool input/output schema: a valid JSON Schema whose root has type "object"."""
    if not isinstance(schema, dict):
        _fail(f"{label} must be a JSON object (a JSON Schema), not {type(schema).__name__}.")
    cls = schema_validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        _fail(f"{label} is not a valid JSON Schema at {where}: {exc.message}")
    if schema.get("type") != "object":
        _fail(f'{label} must have "type": "object" at the root.')


# --- Shared metadata ---------------------------------------------------------------------------


def validate_meta(meta: Any) -> None:
    """Check `_meta` keys follow the MCP key format and avoid reserved prefixes (BP-12)."""
    if not isinstance(meta, dict):
        _fail("_meta must be a JSON object.")
    for key in meta:
        match = _META_KEY.match(key)
        if match is None or key == "":
            _fail(
                f"_meta key {key!r} is not valid: use an optional prefix of dot-separated labels and '/', "
                "then a name that starts and ends with a letter or digit (e.g. 'example.com/flag')."
            )
        prefix = match.group("prefix")
        if prefix:
            labels = prefix.lower().split(".")
            if len(labels) >= 2 and labels[-2] in RESERVED_META_LABELS:
                _fail(f"_meta key {key!r} uses the prefix '{prefix}/', which is reserved for MCP.")


def validate_icons(icons: Any) -> None:
    """Check a list of MCP Icon objects {src, mimeType?, sizes?, theme?}."""
    if not isinstance(icons, list):
        _fail("Icons must be a JSON list of icon objects.")
    for index, icon in enumerate(icons):
        where = f"Icon {index + 1}"
        if not isinstance(icon, dict):
            _fail(f"{where} must be an object with at least 'src'.")
        unknown = sorted(set(icon) - ICON_KEYS)
        if unknown:
            _fail(f"{where} has unknown keys {unknown}; allowed: src, mimeType, sizes, theme.")
        src = icon.get("src")
        if not isinstance(src, str) or not src:
            _fail(f"{where} needs 'src', an https: URL or a data: URI.")
        lowered = src.lower()
        if lowered.startswith("https:"):
            if not urlsplit(src).hostname:
                _fail(f"{where}: 'src' must be a full https URL.")
        elif lowered.startswith("data:"):
            if "," not in src:
                _fail(f"{where}: 'src' data: URI has no data.")
        else:
            _fail(f"{where}: 'src' must be an https: URL or a data: URI.")
        if "mimeType" in icon and (
            not isinstance(icon["mimeType"], str) or not _MIME.match(icon["mimeType"])
        ):
            _fail(f"{where}: 'mimeType' must be a MIME type such as image/png.")
        if "sizes" in icon:
            sizes = icon["sizes"]
            if not _is_str_list(sizes) or not all(_ICON_SIZE.match(size) for size in sizes):
                _fail(f'{where}: \'sizes\' must be a list of strings like "48x48" or "any".')
        if "theme" in icon and icon["theme"] not in ICON_THEMES:
            _fail(f'{where}: \'theme\' must be "light" or "dark".')


def validate_tool_annotations(annotations: Any) -> None:
    """Check ToolAnnotations: only the five known keys, title a string, *Hint booleans."""
    if not isinstance(annotations, dict):
        _fail("Annotations must be a JSON object.")
    for key, value in annotations.items():
        expected = TOOL_ANNOTATION_TYPES.get(key)
        if expected is None:
            _fail(f"Unknown annotation {key!r}; allowed: {', '.join(TOOL_ANNOTATION_TYPES)}.")
        if not isinstance(value, expected):
            kind = "a string" if expected is str else "true or false"
            _fail(f"Annotation {key!r} must be {kind}.")


def validate_annotations(annotations: Any) -> None:
    """Check content/resource Annotations: audience, priority 0-1, lastModified ISO 8601 (CB-04)."""
    if not isinstance(annotations, dict):
        _fail("Annotations must be a JSON object.")
    unknown = sorted(set(annotations) - {"audience", "priority", "lastModified"})
    if unknown:
        _fail(f"Unknown annotations {unknown}; allowed: audience, priority, lastModified.")
    if "audience" in annotations:
        audience = annotations["audience"]
        if not _is_str_list(audience) or not set(audience) <= AUDIENCES:
            _fail('Annotation "audience" must be a list of "user" and/or "assistant".')
    if "priority" in annotations:
        priority = annotations["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int | float) or not 0 <= priority <= 1:
            _fail('Annotation "priority" must be a number from 0 to 1.')
    if "lastModified" in annotations:
        value = annotations["lastModified"]
        try:
            if not isinstance(value, str):
                raise ValueError
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            _fail('Annotation "lastModified" must be an ISO 8601 timestamp, e.g. "2025-01-12T15:00:58Z".')


def validate_mime_type(mime_type: str) -> None:
    """Check a MIME type looks like type/subtype."""
    if mime_type and not _MIME.match(mime_type):
        _fail(f"{mime_type!r} is not a MIME type (type/subtype, e.g. text/plain).")


# --- Resources ---------------------------------------------------------------------------------


def validate_resource_uri(uri: Any) -> None:
    """Check a resource URI is absolute: a scheme, then no whitespace (RS-08, RFC 3986)."""
    if not isinstance(uri, str) or not uri:
        _fail("A URI is required.")
    scheme, sep, rest = uri.partition(":")
    if not sep or not _SCHEME.match(scheme) or not rest:
        _fail(f"{uri!r} is not an absolute URI: start with a scheme such as 'myapp://' or 'https://'.")
    if re.search(r"\s", uri):
        _fail("A URI must not contain whitespace.")


def uri_template_variables(template: str) -> list[str]:
    """Return the variable names of an RFC 6570 template, in order."""
    return list(URITemplate(template).variable_names)


def validate_uri_template(template: Any) -> None:
    """Check an RFC 6570 URI template with an absolute scheme and at least one variable."""
    if not isinstance(template, str) or not template:
        _fail("A URI template is required.")
    depth = 0
    expression = ""
    literal = ""
    for char in template:
        if char == "{":
            if depth:
                _fail("Nested '{' in URI template.")
            depth, expression = 1, ""
        elif char == "}":
            if not depth:
                _fail("Unmatched '}' in URI template.")
            if not _EXPRESSION.match(expression):
                _fail(f"'{{{expression}}}' is not a valid RFC 6570 expression.")
            depth = 0
        elif depth:
            expression += char
        else:
            literal += char
    if depth:
        _fail("Unclosed '{' in URI template.")
    if _TEMPLATE_LITERAL_FORBIDDEN.search(literal):
        _fail(
            "A URI template must not contain spaces, quotes, '<', '>', '\\', '^', '`' or '|' outside expressions."
        )
    scheme, sep, _rest = template.partition(":")
    if not sep or not _SCHEME.match(scheme):
        _fail(f"{template!r} must start with a URI scheme such as 'myapp://'.")
    if not uri_template_variables(template):
        _fail("A URI template needs at least one {variable}; use a plain resource otherwise.")


def validate_template_completions(template: str, completions: Any) -> None:
    """Check completions name only the template's variables (values: see validate_completion_values)."""
    if not isinstance(completions, dict):
        _fail('Completions must be a JSON object such as {"id": ["1", "2"]}.')
    try:
        variables = set(uri_template_variables(template))
    except Exception:  # the template's own error is reported on its field
        return
    for name, values in completions.items():
        if name not in variables:
            _fail(
                f"Completions for {name!r}, but the template has no such variable (has: {sorted(variables)})."
            )
        validate_completion_values(values, name, variables)


# --- Completions -------------------------------------------------------------------------------


def validate_completion_values(config: Any, name: str, others: set[str]) -> None:
    """Check configured completions: a list of strings, or values depending on another argument.

    The dependent shape is {"argument": other, "values": {other's value: [strings]}, "default": [strings]}.
    """
    if _is_str_list(config):
        return
    if not isinstance(config, dict):
        _fail(
            f"Completions for {name!r} must be a list of strings or an object with 'argument' and 'values'."
        )
    unknown = sorted(set(config) - {"argument", "values", "default"})
    if unknown:
        _fail(f"Completions for {name!r} have unknown keys {unknown}; allowed: argument, values, default.")
    other = config.get("argument")
    if other not in others or other == name:
        _fail(
            f"Completions for {name!r}: 'argument' must name another of {sorted(others - {name}) or 'none'}."
        )
    values = config.get("values", {})
    if not isinstance(values, dict) or not all(_is_str_list(v) for v in values.values()):
        _fail(f"Completions for {name!r}: 'values' must map each value of {other!r} to a list of strings.")
    if "default" in config and not _is_str_list(config["default"]):
        _fail(f"Completions for {name!r}: 'default' must be a list of strings.")


# --- Prompts -----------------------------------------------------------------------------------


def validate_prompt_arguments(arguments: Any) -> None:
    """Check prompt arguments: a list of {name, title?, description?, required?, completions?}."""
    if not isinstance(arguments, list):
        _fail("Arguments must be a JSON list of argument objects.")
    seen: set[str] = set()
    for index, argument in enumerate(arguments):
        where = f"Argument {index + 1}"
        if not isinstance(argument, dict):
            _fail(f'{where} must be an object such as {{"name": "code", "required": true}}.')
        unknown = sorted(set(argument) - PROMPT_ARGUMENT_KEYS)
        if unknown:
            _fail(f"{where} has unknown keys {unknown}; allowed: {', '.join(sorted(PROMPT_ARGUMENT_KEYS))}.")
        name = argument.get("name")
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            _fail(f"{where} needs a 'name' of letters, digits and '_' (usable in the message template).")
        if name in seen:
            _fail(f"Argument {name!r} is defined twice.")
        seen.add(name)
        for key in ("title", "description"):
            if key in argument and not isinstance(argument[key], str):
                _fail(f"Argument {name!r}: '{key}' must be a string.")
        if "required" in argument and not isinstance(argument["required"], bool):
            _fail(f"Argument {name!r}: 'required' must be true or false.")
    names = {argument["name"] for argument in arguments}
    for argument in arguments:
        if "completions" in argument:
            validate_completion_values(argument["completions"], argument["name"], names)


def _validate_base64(value: Any, where: str) -> None:
    if not isinstance(value, str):
        _fail(f"{where}: data must be a base64 string.")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        _fail(f"{where}: data is not valid base64.")


def validate_content_spec(content: Any, where: str = "Content") -> None:
    """Check one content spec (shapes of mcp_app.content.blocks): text template, media, resource."""
    if not isinstance(content, dict):
        _fail(f"{where} must be an object with a 'type'.")
    kind = content.get("type")
    if kind not in CONTENT_TYPES:
        _fail(f"{where}: 'type' must be one of {', '.join(CONTENT_TYPES)}.")
    if "annotations" in content:
        validate_annotations(content["annotations"])
    if "_meta" in content:
        validate_meta(content["_meta"])
    if kind == "text":
        try:
            validate_template(content.get("text"), f"text of {where.lower()}")
        except ContentError as exc:
            _fail(f"{where}: {exc.message}")
    elif kind in ("image", "audio"):
        if "resource" in content:
            # Taken from one of the tenant's (binary) resources when rendered.
            validate_resource_uri(content["resource"])
        else:
            _validate_base64(content.get("data"), where)
            if not isinstance(content.get("mimeType"), str) or not _MIME.match(content["mimeType"]):
                _fail(f"{where}: an {kind} block needs 'data' and 'mimeType', or a 'resource' uri.")
    else:
        # resource (embeds the tenant resource) and resource_link (points at any URI).
        validate_resource_uri(content.get("uri"))
        for key in ("name", "title", "description", "mimeType"):
            if key in content and not isinstance(content[key], str):
                _fail(f"{where}: '{key}' must be a string.")


def validate_prompt_messages(messages: Any) -> None:
    """Check prompt messages: a list of {role: user|assistant, content: content spec}."""
    if not isinstance(messages, list) or not messages:
        _fail('Messages must be a non-empty JSON list of {"role": ..., "content": {...}}.')
    for index, message in enumerate(messages):
        where = f"Message {index + 1}"
        if not isinstance(message, dict):
            _fail(f"{where} must be an object with 'role' and 'content'.")
        unknown = sorted(set(message) - {"role", "content"})
        if unknown:
            _fail(f"{where} has unknown keys {unknown}; allowed: role, content.")
        if message.get("role") not in ROLES:
            _fail(f'{where}: \'role\' must be "user" or "assistant".')
        validate_content_spec(message.get("content"), f"{where} content")


# --- Tool handlers -----------------------------------------------------------------------------


def validate_handler(kind: str, config: Any) -> None:
    """Check a tool's handler kind is registered and its settings are valid for it."""
    registry.validate_config(kind, config)


def validate_template_handler(kind: str, config: Any) -> None:
    """Check a resource template's handler kind can produce contents and its settings are valid."""
    registry.validate_template_config(kind, config)


# --- Whole rows --------------------------------------------------------------------------------


def _common_checks(obj: Any) -> list[tuple[str, Callable[[], None]]]:
    return [("icons", lambda: validate_icons(obj.icons)), ("meta", lambda: validate_meta(obj.meta))]


def clean_tool(tool: Any) -> None:
    """Validate a Tool row's JSON fields and handler (field → errors)."""
    checks = [
        ("input_schema", lambda: validate_object_schema(tool.input_schema, "Input schema")),
        ("annotations", lambda: validate_tool_annotations(tool.annotations)),
        ("handler_config", lambda: validate_handler(tool.handler, tool.handler_config)),
        *_common_checks(tool),
    ]
    if tool.output_schema is not None:
        checks.append(("output_schema", lambda: validate_object_schema(tool.output_schema, "Output schema")))
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
