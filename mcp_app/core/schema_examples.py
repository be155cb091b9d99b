"""Arguments made from a tool's input schema: the Try page's starting point and the self-check's example.

Pure functions over a JSON Schema (no validation here: the caller validates what they make with the
tool's own validation, protocol/schemas.py). Two uses, two strengths:

- ``example_arguments``: what a person starts from on the Try page, each property's default and a blank
  value of its type for the required ones (they fill in the rest);
- ``sample_arguments``: what a careful client would send unaided (AMB-241): the schema's own first
  ``examples`` item when it has one, else per required property its default, first example, ``const``
  or first ``enum`` value, or a value of its type made to fit the common bounds (length, range, items,
  formats). Optional properties without a default are left out, as a client may.
"""

from __future__ import annotations

import copy
from typing import Any

_PLACEHOLDERS = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
# A value of each common `format`, so a sample passes a format check.
_FORMATS = {
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
}
# Deep schemas are not walked past this: a sample is a hint, not a proof.
_MAX_DEPTH = 8


def _properties(schema: Any) -> tuple[dict[str, Any], list[Any]]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}, []
    required = found if isinstance(found := schema.get("required"), list) else []
    return properties, required


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments to start from: each property's default, and a blank value for required ones without."""
    properties, required = _properties(schema)
    example: dict[str, Any] = {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        if "default" in spec:
            example[name] = spec["default"]
        elif name in required:
            kind = spec.get("type")
            example[name] = _PLACEHOLDERS.get(kind if isinstance(kind, str) else "string", "")
    return example


def _type_of(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        return kind
    if "properties" in spec:
        return "object"
    if "items" in spec:
        return "array"
    return "string"


def _number(spec: dict[str, Any], integer: bool) -> int | float:
    low = spec.get("minimum", spec.get("exclusiveMinimum"))
    high = spec.get("maximum", spec.get("exclusiveMaximum"))
    value: float = 0
    if isinstance(low, int | float):
        value = low + (1 if "exclusiveMinimum" in spec and "minimum" not in spec else 0)
    elif isinstance(high, int | float) and high < 0:
        value = high - (1 if "exclusiveMaximum" in spec and "maximum" not in spec else 0)
    return int(value) if integer else value


def _string(spec: dict[str, Any]) -> str:
    fmt = spec.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    low = found if isinstance(found := spec.get("minLength"), int) else 0
    high = found if isinstance(found := spec.get("maxLength"), int) else None
    text = "example"
    if len(text) < low:
        text = text + "x" * (low - len(text))
    return text[:high] if high is not None else text


def sample_value(spec: Any, depth: int = 0) -> Any:
    """A value `spec` likely accepts: its own default, example, const or enum first."""
    if not isinstance(spec, dict) or depth > _MAX_DEPTH:
        return ""
    for key in ("default", "const"):
        if key in spec:
            return copy.deepcopy(spec[key])
    for key in ("examples", "enum"):
        values = spec.get(key)
        if isinstance(values, list) and values:
            return copy.deepcopy(values[0])
    for key in ("oneOf", "anyOf", "allOf"):
        branches = spec.get(key)
        if isinstance(branches, list) and branches and isinstance(branches[0], dict):
            return sample_value({**{k: v for k, v in spec.items() if k != key}, **branches[0]}, depth + 1)
    kind = _type_of(spec)
    if kind == "object":
        return _object(spec, depth + 1)
    if kind == "array":
        count = found if isinstance(found := spec.get("minItems"), int) else 0
        items = spec.get("items")
        return [sample_value(items, depth + 1) for _ in range(min(count, 10))]
    if kind in ("integer", "number"):
        return _number(spec, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return _string(spec)


def _object(schema: dict[str, Any], depth: int) -> dict[str, Any]:
    properties, required = _properties(schema)
    return {
        name: sample_value(spec, depth)
        for name, spec in properties.items()
        if name in required or (isinstance(spec, dict) and "default" in spec)
    }


def sample_arguments(schema: Any) -> dict[str, Any]:
    """The arguments a client would send from the schema alone (the module's docstring says how)."""
    if not isinstance(schema, dict):
        return {}
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return copy.deepcopy(examples[0])
    return _object(schema, 0)
