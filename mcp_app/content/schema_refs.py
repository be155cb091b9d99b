"""References inside tenant JSON Schemas: only to the schema itself, never fetched (AMB-117).

jsonschema's default registry fetches any URI a `$ref` names, with urllib, at validation time: a
tenant's schema could make the server request any address (the http kind's SSRF guard bypassed),
and a relative or remote reference can never resolve here anyway. Schemas are refused at save when
a reference leaves them, and every validator of a tenant's schema is built on ``NO_RETRIEVAL``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

import referencing
import referencing.jsonschema
from referencing.exceptions import Unresolvable

from mcp_app.content.fields import fail

# Knows the JSON Schema meta-schemas (jsonschema adds them) and nothing else; fetches nothing.
NO_RETRIEVAL: referencing.Registry = referencing.Registry()

REF_KEYWORDS = ("$ref", "$dynamicRef")
# Keywords whose values are instance data, not schemas: a "$ref" key in there is a value like any other.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def _references(node: Any, base: str, found: list[tuple[str, str, str]], path: str) -> None:
    """Collect (base URI, reference, where) of every reference keyword under `node`."""
    stack = [(node, base, path)]
    while stack:
        current, uri, where = stack.pop()
        if isinstance(current, list):
            stack.extend((item, uri, f"{where}/{i}") for i, item in enumerate(current))
            continue
        if not isinstance(current, dict):
            continue
        if isinstance(current.get("$id"), str):
            uri = urljoin(uri, current["$id"])
        for key, value in current.items():
            if key in REF_KEYWORDS and isinstance(value, str):
                found.append((uri, value, where or "(root)"))
            elif key not in _DATA_KEYWORDS:
                stack.append((value, uri, f"{where}/{key}"))


def outside_references(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """The (reference, where) pairs of a schema that do not resolve within the schema itself."""
    specification = referencing.jsonschema.specification_with(
        str(schema.get("$schema", "")), default=referencing.jsonschema.DRAFT202012
    )
    resource = specification.create_resource(schema)
    root = resource.id() or ""
    registry = NO_RETRIEVAL.with_resources([("", resource), (root, resource)]).crawl()
    found: list[tuple[str, str, str]] = []
    _references(schema, root, found, "")
    outside = []
    for base, ref, where in found:
        try:
            registry.resolver(base).lookup(ref)
        except Unresolvable:
            outside.append((ref, where))
    return outside


def validate_local_refs(schema: Any, label: str) -> None:
    """Refuse a schema whose `$ref` leads outside it (a URL, another file): it could never validate."""
    if not isinstance(schema, dict):
        return
    try:
        outside = outside_references(schema)
    except ValueError as exc:  # an "$id" that is no URI reference at all
        fail(f"{label}: an \"$id\" is not a valid URI ({exc}).")
    if outside:
        ref, where = outside[0]
        fail(
            f"{label}: the reference {ref!r} at {where} does not lead to a part of this schema. References "
            'may only point inside the schema (such as "#/$defs/name"): nothing is fetched.'
        )
