"""Checks on tenant-defined MCP definitions: the models' clean(), the admin's live check, the API, imports.

``FIELDS`` names, per model and JSON field, the one check of that field: its schema in
mcp_app/content/fields.schema.json (``content.fields.problems``), then what a schema cannot say,
written here with the reason. A check returns every problem it finds as a list of sentences; the
``clean_*`` functions raise them all at once as a field → errors dict, and the admin's live check
(admin/json_check.py) asks ``field_problems`` for the same list (AMB-143).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import models
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from uritemplate import URITemplate

from lib import nesting
from mcp_app.content import fields
from mcp_app.content.schema_refs import validate_local_refs
from mcp_app.core import ui_apps
from mcp_app.core.mcp_headers import invalid_x_mcp_header
from mcp_app.handlers import registry

# AMB-17: a schema without "$schema" is checked (and later validated) as Draft 2020-12.
DEFAULT_SCHEMA_DIALECT = Draft202012Validator

# RFC 6570 §2: an expression is an optional operator and a comma-separated list of varspecs.
_VARSPEC = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(?::[1-9][0-9]{0,3}|\*)?"
_EXPRESSION = re.compile(rf"^[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*$")
_TEMPLATE_LITERAL_FORBIDDEN = re.compile(r"[\s\"'<>\\^`|]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")

# (value, the row's other fields by name) → every problem of the value.
Check = Callable[[Any, Mapping[str, Any]], list[str]]


def _messages(check: Callable[[], None]) -> list[str]:
    try:
        check()
    except ValidationError as exc:
        return exc.messages
    return []


def _schema(name: str) -> Check:
    return lambda value, _row: fields.problems(name, value)


# --- JSON Schema -------------------------------------------------------------------------------


def schema_validator_class(schema: dict[str, Any]) -> type[Validator]:
    """Return the jsonschema validator class for the schema's $schema (default Draft 2020-12)."""
    # None marks an unknown $schema (jsonschema hands back the default it is given; its stubs allow only a class).
    cls: type[Validator] | None = validator_for(schema, default=cast(Any, None))
    if cls is None:
        if "$schema" in schema:
            fields.fail(
                f"Unsupported $schema {schema['$schema']!r}; use a JSON Schema draft URI (e.g. 2020-12)."
            )
        return DEFAULT_SCHEMA_DIALECT
    return cls


def validate_object_schema(schema: Any, label: str = "Schema", object_root: bool = True) -> None:
    """Check a tool input/output schema: a valid JSON Schema, whose root has type "object" if asked.

    By hand, not in fields.schema.json: the meta-schema is the one the value's own $schema names
    (AMB-17), and its references must stay inside it (AMB-117). Input schemas always need the object
    root; an output schema may be any schema (2026-07-28), the tool then being offered to 2026-07-28
    clients only (core.types.offered_to_legacy).
    """
    if not isinstance(schema, dict):
        fields.fail(f"{label} must be a JSON object (a JSON Schema), not {type(schema).__name__}.")
    cls = schema_validator_class(schema)
    found = []
    for error in sorted(cls(cls.META_SCHEMA).iter_errors(schema), key=lambda e: [str(p) for p in e.path]):
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        # Each problem, an anyOf of the meta-schema as its closest branch ("'type' must be one of ...").
        found += [
            f"{label} is not a valid JSON Schema at {where}: {message}"
            for message in fields.explain(error, skip=max(len(error.absolute_path) - 1, 0), subject="It")
        ]
    if found:
        raise ValidationError(found)
    validate_local_refs(schema, label)
    if object_root and schema.get("type") != "object":
        fields.fail(f'{label} must have "type": "object" at the root.')


def validate_x_mcp_headers(schema: Any, label: str = "Input schema") -> None:
    """Check the schema's x-mcp-header annotations (2026-07-28 streamable-http, "Custom Headers").

    A conforming client drops a tool whose annotations break the rules from tools/list, so a tenant
    would publish a tool nobody can call; refuse it here, naming the offending location. By hand: the
    rules relate an annotation to the type of the property it sits on, anywhere in the schema.
    """
    reason = invalid_x_mcp_header(schema)
    if reason is not None:
        fields.fail(f"{label}: {reason}.")


def _input_schema(value: Any, _row: Mapping[str, Any]) -> list[str]:
    found = _messages(lambda: validate_object_schema(value, "Input schema"))
    return found or _messages(lambda: validate_x_mcp_headers(value))


def _output_schema(value: Any, _row: Mapping[str, Any]) -> list[str]:
    if value is None:
        return []
    return _messages(lambda: validate_object_schema(value, "Output schema", object_root=False))


# --- Resources ---------------------------------------------------------------------------------


def uri_template_variables(template: str) -> list[str]:
    """Return the variable names of an RFC 6570 template, in order."""
    return list(URITemplate(template).variable_names)


def validate_uri_template(template: Any) -> None:
    """Check an RFC 6570 URI template with an absolute scheme and at least one variable.

    By hand: RFC 6570's grammar (nesting of braces, operators, varspecs) is past what a pattern reads.
    """
    if not isinstance(template, str) or not template:
        fields.fail("A URI template is required.")
    depth = 0
    expression = ""
    literal = ""
    for char in template:
        if char == "{":
            if depth:
                fields.fail("Nested '{' in URI template.")
            depth, expression = 1, ""
        elif char == "}":
            if not depth:
                fields.fail("Unmatched '}' in URI template.")
            if not _EXPRESSION.match(expression):
                fields.fail(f"'{{{expression}}}' is not a valid RFC 6570 expression.")
            depth = 0
        elif depth:
            expression += char
        else:
            literal += char
    if depth:
        fields.fail("Unclosed '{' in URI template.")
    if _TEMPLATE_LITERAL_FORBIDDEN.search(literal):
        fields.fail(
            "A URI template must not contain spaces, quotes, '<', '>', '\\', '^', '`' or '|' outside expressions."
        )
    scheme, sep, _rest = template.partition(":")
    if not sep or not _SCHEME.match(scheme):
        fields.fail(f"{template!r} must start with a URI scheme such as 'myapp://'.")
    if not uri_template_variables(template):
        fields.fail("A URI template needs at least one {variable}; use a plain resource otherwise.")


def _depends_on(config: Any, name: str, others: set[str]) -> list[str]:
    """A dependent completion names another argument (the shape is the schema's completion_values).

    By hand: which names exist is the row's other values, not this one's.
    """
    if not isinstance(config, dict) or "argument" not in config:
        return []
    other = config["argument"]
    if other in others and other != name:
        return []
    choices = sorted(others - {name}) or "none"
    return [f"Completions for {name!r}: 'argument' must name another of {choices}."]


def template_completions_problems(template: Any, completions: Any) -> list[str]:
    """The completions' shape (schema), then that they name the template's variables (by hand)."""
    found = fields.problems("template_completions", completions)
    if not isinstance(completions, dict) or not isinstance(template, str):
        return found
    try:
        variables = set(uri_template_variables(template))
    except Exception:  # the template's own error is reported on its field
        return found
    for name, values in completions.items():
        if name not in variables:
            found.append(
                f"Completions for {name!r}, but the template has no such variable (has: {sorted(variables)})."
            )
        found += _depends_on(values, name, variables)
    return found


# --- Prompts -----------------------------------------------------------------------------------


def prompt_arguments_problems(arguments: Any, _row: Mapping[str, Any] | None = None) -> list[str]:
    """The arguments' shape (schema), then by hand what relates one argument to another."""
    found = fields.problems("prompt_arguments", arguments)
    if not isinstance(arguments, list):
        return found
    named = [a for a in arguments if isinstance(a, dict) and isinstance(a.get("name"), str)]
    names = [a["name"] for a in named]
    # A schema's uniqueItems compares whole items, not one key of them.
    found += [f"Argument {n!r} is defined twice." for n in sorted({n for n in names if names.count(n) > 1})]
    for argument in named:
        if "completions" in argument:
            found += _depends_on(argument["completions"], argument["name"], set(names))
    return found


# --- Tool handlers -----------------------------------------------------------------------------


def _tool_handler(value: Any, row: Mapping[str, Any]) -> list[str]:
    return registry.config_problems(str(row.get("handler") or ""), value)


def _template_handler(value: Any, row: Mapping[str, Any]) -> list[str]:
    return registry.template_config_problems(str(row.get("handler") or ""), value)


# --- Fields and whole rows ---------------------------------------------------------------------

_COMMON: dict[str, Check] = {"icons": _schema("icons"), "meta": _schema("meta")}


def _tool_meta(value: Any, row: Mapping[str, Any]) -> list[str]:
    """`_meta`'s keys, then its MCP Apps `ui` (AMB-272)."""
    return fields.problems("meta", value) or ui_apps.meta_problems(value)


def _resource_meta(value: Any, row: Mapping[str, Any]) -> list[str]:
    return fields.problems("meta", value) or ui_apps.resource_meta_problems(value)


# model name → JSON (or checked text) field → its one check.
FIELDS: dict[str, dict[str, Check]] = {
    "tool": {
        "input_schema": _input_schema,
        "output_schema": _output_schema,
        "annotations": _schema("tool_annotations"),
        "handler_config": _tool_handler,
        **_COMMON,
        "meta": _tool_meta,
    },
    "prompt": {
        "arguments": prompt_arguments_problems,
        "messages": _schema("prompt_messages"),
        **_COMMON,
    },
    "resource": {
        "uri": _schema("uri"),
        "mime_type": _schema("mime_type"),
        "annotations": _schema("annotations"),
        **_COMMON,
        "meta": _resource_meta,
    },
    "resourcetemplate": {
        "uri_template": lambda value, _row: _messages(lambda: validate_uri_template(value)),
        "completions": lambda value, row: template_completions_problems(row.get("uri_template"), value),
        "handler_config": _template_handler,
        "mime_type": _schema("mime_type"),
        "annotations": _schema("annotations"),
        **_COMMON,
    },
}


def depth_problems(value: Any) -> list[str]:
    """Refuse JSON nested past a definition's share of the one limit (AMB-115), room left for its frames."""
    limit = nesting.definition_limit()
    if nesting.depth_exceeds(value, limit):
        return [f"Nested deeper than {limit} levels (MCP_MAX_JSON_DEPTH less {nesting.FRAME})."]
    return []


def field_problems(model: str, field: str, value: Any, row: Mapping[str, Any]) -> list[str]:
    """Every problem saving `value` in this field would show (none: accepted); `row`: its other fields."""
    check = FIELDS.get(model, {}).get(field)
    if check is None:
        return []
    # A value past the depth limit is not walked further (its own checks would recurse as deep).
    return depth_problems(value) or check(value, row)


def _row_errors(obj: models.Model) -> dict[str, list[str]]:
    model = obj._meta.model_name or ""
    row = vars(obj)
    errors: dict[str, list[str]] = {}
    for field in obj._meta.concrete_fields:
        if field.name not in FIELDS.get(model, {}) and not isinstance(field, models.JSONField):
            continue
        value = getattr(obj, field.attname)
        found = field_problems(model, field.name, value, row) or depth_problems(value)
        if found:
            errors[field.name] = found
    return errors


def _raise(errors: dict[str, list[str]]) -> None:
    if errors:
        raise ValidationError(errors)


def clean_tool(tool: Any) -> None:
    """Validate a Tool row's JSON fields and handler, and the rules across its fields (field → errors)."""
    errors = _row_errors(tool)
    if tool.handler == "form" and tool.execution == "background":
        errors.setdefault("execution", []).append(
            "A form asks the person, so it runs in the server process, not on a worker."
        )
    config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
    if tool.output_schema is not None and tool.handler == "form" and config.get("sensitive") is True:
        errors.setdefault("output_schema", []).append(
            "A sensitive form never returns its answers as structured output: remove the "
            "output schema (its 'text' may name the answers the model should see)."
        )
    if "meta" not in errors:
        errors.update(app_link_problems(tool))
    _raise(errors)


# The resource URIs an import saves with the tools it checks (portability/importer.py): a tool may
# link an app the same document brings, planned (checked) before anything is saved.
_SAVED_ALONGSIDE: ContextVar[frozenset[str]] = ContextVar("saved_alongside", default=frozenset())


@contextmanager
def resources_saved_alongside(uris: Iterable[str]) -> Iterator[None]:
    token = _SAVED_ALONGSIDE.set(frozenset(uris))
    try:
        yield
    finally:
        _SAVED_ALONGSIDE.reset(token)


# The tool names an import saves with the quotas it checks (AMB-352): a quota may count a tool the
# same document brings.
_TOOLS_ALONGSIDE: ContextVar[frozenset[str]] = ContextVar("tools_alongside", default=frozenset())


@contextmanager
def tools_saved_alongside(names: Iterable[str]) -> Iterator[None]:
    token = _TOOLS_ALONGSIDE.set(frozenset(names))
    try:
        yield
    finally:
        _TOOLS_ALONGSIDE.reset(token)


def tools_alongside() -> frozenset[str]:
    """The tool names the import being checked saves too (empty outside an import)."""
    return _TOOLS_ALONGSIDE.get()


def tool_exists(tenant_id: int, name: str) -> bool:
    """A tool of the tenant's, saved or saved by the same import."""
    if name in _TOOLS_ALONGSIDE.get():
        return True
    return apps.get_model("mcp_app", "Tool").objects.filter(tenant_id=tenant_id, name=name).exists()


def app_link_problems(tool: Any) -> dict[str, list[str]]:
    """A tool's MCP App is an app resource of its own tenant (AMB-272), saved before the tool.

    An upstream's tool is left alone: its app lives on the upstream, published with its resources.
    """
    uri = ui_apps.resource_uri(tool.meta)
    if not isinstance(uri, str) or tool.handler == "upstream" or tool.tenant_id is None:
        return {}
    if uri in _SAVED_ALONGSIDE.get():
        return {}  # a resource of the same import: its own check makes a ui:// resource an app
    resource = (
        apps.get_model("mcp_app", "Resource")
        .objects.filter(tenant_id=tool.tenant_id, uri=uri)
        .values_list("mime_type", flat=True)
        .first()
    )
    if resource is None:
        return {
            "meta": [f"The app {uri} is not a resource of this tenant: add the resource first, then link it."]
        }
    if not ui_apps.is_app_mime_type(resource):
        return {"meta": [f"The resource {uri} is not an app: its MIME type must be {ui_apps.MIME_TYPE}."]}
    return {}


def clean_prompt(prompt: Any) -> None:
    """Validate a Prompt row's arguments, messages, icons and _meta."""
    _raise(_row_errors(prompt))


def clean_resource(resource: Any) -> None:
    """Validate a Resource row's URI, MIME type, annotations, icons and _meta; an app's URI and type go together."""
    errors = _row_errors(resource)
    app_uri, app_type = ui_apps.is_app_uri(resource.uri), ui_apps.is_app_mime_type(resource.mime_type)
    if app_uri and not app_type:
        errors.setdefault("mime_type", []).append(
            f"A ui:// resource is an MCP App: its MIME type must be {ui_apps.MIME_TYPE} (an HTML document)."
        )
    elif app_type and not app_uri:
        errors.setdefault("uri", []).append(
            f"An MCP App ({ui_apps.MIME_TYPE}) lives at a ui:// URI, such as ui://{resource.name or 'app'}."
        )
    if app_uri and resource.blob is None and not (resource.text or "").strip():
        errors.setdefault("text", []).append("An MCP App needs its HTML document here.")
    _raise(errors)


def clean_resource_template(template: Any) -> None:
    """Validate a ResourceTemplate row's URI template, completions, annotations, icons and _meta."""
    _raise(_row_errors(template))
