"""JSON Schema validation of tool arguments and structured output (TL-08, TL-13, AMB-17).

The dialect is JSON Schema 2020-12 unless the schema's `$schema` names another draft that
jsonschema knows (2025-11-25 makes 2020-12 the default). Remote `$ref`s are never fetched (AMB-117):
a schema saved before they were refused at save answers as misconfigured.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from mcp_app.content.schema_refs import NO_RETRIEVAL
from mcp_app.protocol.jsonrpc import truncate

MAX_REPORTED_ERRORS = 5
MAX_ERROR_LENGTH = 200

# Validators compiled per schema object: catalog definitions are immutable and live as long as
# their catalog version, so the identity of the schema dict is a sound key. The schema itself is
# kept in the entry, which keeps its id from being reused while the entry lives.
_compiled: dict[int, tuple[dict[str, Any], Validator | None]] = {}
_MAX_COMPILED = 2048


class InvalidSchema(Exception):
    """The tenant's schema itself is not a valid JSON Schema."""


def compile_schema(schema: dict[str, Any]) -> Validator:
    """Return a validator for `schema`, raising InvalidSchema when the schema is broken."""
    entry = _compiled.get(id(schema))
    if entry is not None and entry[0] is schema:
        if entry[1] is None:
            raise InvalidSchema
        return entry[1]
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
        validator: Validator | None = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=NO_RETRIEVAL)
    except SchemaError:
        validator = None
    if len(_compiled) >= _MAX_COMPILED:
        _compiled.clear()
    _compiled[id(schema)] = (schema, validator)
    if validator is None:
        raise InvalidSchema
    return validator


def _location(path: Any) -> str:
    parts = [str(p) for p in path]
    return "/".join(parts) if parts else "(root)"


def errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Return readable, bounded descriptions of how `instance` fails `schema` (empty when valid)."""
    validator = compile_schema(schema)
    try:
        found = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.path)), e.message))
    except Unresolvable:  # a reference that leaves the schema: nothing is fetched
        raise InvalidSchema from None
    # jsonschema messages quote the offending value, which may be huge: each one is capped.
    messages = [f"at {_location(e.path)}: {truncate(e.message, MAX_ERROR_LENGTH)}" for e in found]
    if len(messages) > MAX_REPORTED_ERRORS:
        rest = len(messages) - MAX_REPORTED_ERRORS
        messages = messages[:MAX_REPORTED_ERRORS] + [f"and {rest} more problem(s)"]
    return messages
