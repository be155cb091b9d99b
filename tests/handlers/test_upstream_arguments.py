"""A published upstream tool takes exactly the arguments its published definition declares (AMB-280).

The rule, table by table: JSON Schema admits any property unless `additionalProperties` says otherwise;
for a published upstream tool absence means "no", an explicit `additionalProperties` (or
`unevaluatedProperties`) other than false means "yes", and a fixed argument is never the client's.
End to end, through Daphne with the SDK client and a real upstream: tests/e2e/test_upstream_contract.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.core.types import ToolDef
from mcp_app.handlers import registry, upstream


def published(
    schema: dict[str, Any], fixed: dict[str, Any] | None = None, handler: str = "upstream"
) -> ToolDef:
    return ToolDef(
        id=1,
        name="ref_echo",
        title="",
        description="",
        input_schema=schema,
        output_schema=None,
        annotations={},
        icons=[],
        meta={},
        handler=handler,
        handler_config={"upstream": "ref", "tool": "echo", "fixed": fixed or {}},
    )


TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}

CASES = [
    # (schema, arguments, refused)
    (TEXT, {"text": "hi"}, []),
    (TEXT, {"text": "hi", "loud": True}, ["loud"]),
    (TEXT, {"loud": True, "a": 1}, ["a", "loud"]),
    ({"type": "object"}, {"anything": 1}, ["anything"]),  # no properties: takes nothing
    ({"type": "object"}, {}, []),
    ({**TEXT, "additionalProperties": False}, {"loud": True}, ["loud"]),
    ({**TEXT, "additionalProperties": True}, {"loud": True}, []),  # the schema's own word
    ({**TEXT, "additionalProperties": {"type": "boolean"}}, {"loud": True}, []),  # a schema: validated later
    ({**TEXT, "unevaluatedProperties": True}, {"loud": True}, []),
    ({**TEXT, "patternProperties": {"^x-": {}}}, {"x-trace": "1", "y": 1}, ["y"]),
    ({**TEXT, "patternProperties": {"([": {}}}, {"([": 1}, ["(["]),  # an unreadable pattern declares nothing
    ({"type": "object", "allOf": [TEXT, {"properties": {"loud": {}}}]}, {"text": "", "loud": True}, []),
    ({"type": "object", "anyOf": [TEXT, {"properties": {"n": {}}}]}, {"n": 1, "m": 2}, ["m"]),
    (
        {"$ref": "#/$defs/Args", "$defs": {"Args": TEXT}},
        {"text": "hi", "loud": True},
        ["loud"],
    ),
    ({"$ref": "#/$defs/Loop", "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}}, {"a": 1}, ["a"]),  # a cycle ends
    ({"$ref": "https://example.com/schema.json"}, {"a": 1}, ["a"]),  # a remote $ref is never followed
]


@pytest.mark.parametrize(("schema", "arguments", "refused"), CASES)
def test_only_what_the_published_schema_declares_is_taken(schema, arguments, refused) -> None:
    assert upstream.undeclared(published(schema), arguments) == refused


def test_a_fixed_argument_is_refused_even_where_the_schema_admits_more() -> None:
    open_schema = {**TEXT, "additionalProperties": True}
    tool = published(open_schema, fixed={"delay": 0.01})
    assert upstream.undeclared(tool, {"text": "hi", "delay": 5}) == ["delay"]
    assert upstream.undeclared(published(TEXT, fixed={"delay": 0.01}), {"delay": 5}) == ["delay"]


def test_the_refusal_names_each_argument() -> None:
    tool = published(TEXT)
    assert registry.refused_arguments(tool, {"text": "hi"}) is None
    names, why = registry.refused_arguments(tool, {"loud": True})
    assert names == ["loud"]
    assert why == (
        "Tool 'ref_echo' does not take the argument 'loud': its published definition does not declare it."
    )
    names, why = registry.refused_arguments(tool, {"b": 1, "a": 2})
    assert names == ["a", "b"] and "the arguments 'a', 'b'" in why and "declare them" in why


def test_a_tenants_own_kinds_keep_json_schemas_reading() -> None:
    # The owner wrote both the schema and the handler: absent additionalProperties admits more there.
    assert registry.refused_arguments(published(TEXT, handler="template"), {"loud": True}) is None


def test_a_flood_of_arguments_is_named_in_a_bounded_sentence() -> None:
    names, why = registry.refused_arguments(published(TEXT), {f"a{i:05d}": 1 for i in range(5_000)})
    assert len(names) == 5_000 and why.endswith(
        "and 4990 more: its published definition does not declare them."
    )
    assert len(why) < 400


@pytest.mark.django_db
async def test_the_handler_refuses_too_before_it_reaches_for_the_upstream(ctx) -> None:
    # A path without protocol/tools.py (a background worker runs registry.run_inline): the handler's
    # own check answers first, before the upstream is even resolved (this row has none).
    result = await registry.run_inline(ctx, published(TEXT, fixed={"delay": 1}), {"text": "hi", "delay": 9})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "Tool 'ref_echo' does not take the argument 'delay': its published definition does not declare it."
    )
    unresolved = await registry.run_inline(ctx, published(TEXT), {"text": "hi"})
    assert "is not available" in unresolved["content"][0]["text"]  # what reaching for it would have said
