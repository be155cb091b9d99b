"""mcp_app.core.mcp_headers: the x-mcp-header rules of 2026-07-28, checked against the official SDK.

The SDK (`mcp`, a test dependency only) is the reference: each table below runs through ours and
through `mcp.shared.inbound`, and both must give the spec's answer.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.inbound import (
    decode_header_value,
    encode_header_value,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    validate_mcp_param_headers,
    x_mcp_header_map,
)

from mcp_app.core import mcp_headers as h


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def prop(token: Any, kind: str = "string") -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": token}


# --- Schema rules --------------------------------------------------------------------------------

VALID_SCHEMAS = {
    "a string property": obj(region=prop("Region"), query={"type": "string"}),
    "integer and boolean properties": obj(n=prop("N", "integer"), b=prop("Dry-Run", "boolean")),
    "a nested property reached only through properties": obj(
        filter={"type": "object", "properties": {"region": prop("Region")}}
    ),
    "every tchar": obj(a=prop("!#$%&'*+-.^_`|~09azAZ")),
    "no annotation at all": obj(a={"type": "string"}),
    "a property named x-mcp-header": obj(**{"x-mcp-header": {"type": "string"}}),
    "annotation-shaped instance data": obj(
        a={"type": "string", "default": {"x-mcp-header": "X"}, "examples": [{"x-mcp-header": "Y"}]}
    ),
    "an object schema with no properties": {"type": "object"},
    "an empty schema": {},
}

INVALID_SCHEMAS = {
    "an empty name": obj(a=prop("")),
    "a space in the name": obj(a=prop("A B")),
    "CR LF in the name": obj(a=prop("A\r\nX-Injected: 1")),
    "a tab in the name": obj(a=prop("A\tB")),
    "a colon in the name": obj(a=prop("A:B")),
    "non-ASCII in the name": obj(a=prop("Région")),
    "a name that is not a string": obj(a=prop(5)),
    "two names equal ignoring case": obj(a=prop("Region"), b=prop("region")),
    "a name repeated at another depth": obj(
        a=prop("A"), f={"type": "object", "properties": {"b": prop("a")}}
    ),
    "a number property": obj(a=prop("A", "number")),
    "an object property": obj(a=prop("A", "object")),
    "an array property": obj(a=prop("A", "array")),
    "a property with no type": obj(a={"x-mcp-header": "A"}),
    "a property with a list of types": obj(a={"type": ["string", "null"], "x-mcp-header": "A"}),
    "the root": {"type": "object", "x-mcp-header": "A"},
    "items": obj(tags={"type": "array", "items": prop("Tag")}),
    "prefixItems": obj(t={"type": "array", "prefixItems": [prop("T")]}),
    "contains": obj(t={"type": "array", "contains": prop("T")}),
    "oneOf": obj(a={"oneOf": [prop("A"), {"type": "integer"}]}),
    "anyOf": {"type": "object", "anyOf": [obj(a=prop("A"))]},
    "allOf": {"type": "object", "allOf": [obj(a=prop("A"))]},
    "not": {"type": "object", "not": obj(a=prop("A"))},
    "if": {"type": "object", "if": obj(a=prop("A"))},
    "then": {"type": "object", "if": {}, "then": obj(a=prop("A"))},
    "else": {"type": "object", "if": {}, "else": obj(a=prop("A"))},
    "$defs behind a $ref": {
        "type": "object",
        "$defs": {"r": prop("R")},
        "properties": {"r": {"$ref": "#/$defs/r"}},
    },
    "definitions": {"type": "object", "definitions": {"r": prop("R")}},
    "additionalProperties": {"type": "object", "additionalProperties": prop("A")},
    "patternProperties": {"type": "object", "patternProperties": {"^a": prop("A")}},
    "propertyNames": {"type": "object", "propertyNames": prop("A")},
    "unevaluatedProperties": {"type": "object", "unevaluatedProperties": prop("A")},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"a": obj(b=prop("B"))}},
    "properties below an items": obj(t={"type": "array", "items": obj(a=prop("A"))}),
}


@pytest.mark.parametrize("schema", VALID_SCHEMAS.values(), ids=VALID_SCHEMAS.keys())
def test_a_valid_header_annotation_is_accepted_by_us_and_by_the_sdk(schema):
    assert h.invalid_x_mcp_header(schema) is None
    assert find_invalid_x_mcp_header(schema) is None


@pytest.mark.parametrize("schema", INVALID_SCHEMAS.values(), ids=INVALID_SCHEMAS.keys())
def test_each_invalid_header_annotation_of_the_spec_is_refused_by_us_and_by_the_sdk(schema):
    assert h.invalid_x_mcp_header(schema) is not None
    assert find_invalid_x_mcp_header(schema) is not None


@pytest.mark.parametrize(
    "schema",
    [
        obj(t={"type": "array", "items": [prop("T")]}),
        obj(t={"type": "array", "additionalItems": prop("T")}),
        {"type": "object", "dependencies": {"a": obj(b=prop("B"))}},
    ],
    ids=["tuple items", "additionalItems", "dependencies"],
)
def test_draft_07_array_and_dependency_keywords_hide_an_annotation_too_though_the_sdk_overlooks_them(schema):
    # Stricter than the SDK on purpose: tool schemas are often draft-07, and these are not `properties`.
    assert "statically reachable" in h.invalid_x_mcp_header(schema)
    assert find_invalid_x_mcp_header(schema) is None


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (obj(a=prop("")), ["#/properties/a", "empty"]),
        (obj(a=prop("A\r\nB")), ["#/properties/a", "control characters"]),
        (obj(a=prop("A B")), ["'A B'", "#/properties/a", "token"]),
        (obj(a=prop("Region"), b=prop("REGION")), ["'REGION'", "#/properties/b", "#/properties/a"]),
        (obj(a=prop("A", "number")), ["#/properties/a", "'number'"]),
        (
            obj(tags={"type": "array", "items": prop("Tag")}),
            ["#/properties/tags/items", "statically reachable"],
        ),
        ({"type": "object", "x-mcp-header": "A"}, ["schema root", "statically reachable"]),
        ({"type": "object", "patternProperties": {"a/b": prop("A")}}, ["#/patternProperties/a~1b"]),
    ],
)
def test_the_reason_for_refusing_an_annotation_names_where_it_is_and_what_is_wrong(schema, words):
    reason = h.invalid_x_mcp_header(schema)
    for word in words:
        assert word in reason


def test_param_headers_maps_each_property_path_to_its_token_like_the_sdk():
    schema = obj(
        region=prop("Region"),
        query={"type": "string"},
        filter={"type": "object", "properties": {"tenant": prop("Tenant"), "n": prop("N", "integer")}},
    )
    expected = {("region",): "Region", ("filter", "tenant"): "Tenant", ("filter", "n"): "N"}
    assert h.param_headers(schema) == expected == x_mcp_header_map(schema)


# --- Value encoding ------------------------------------------------------------------------------

SPEC_ENCODING_EXAMPLES = [
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("value", "header"), SPEC_ENCODING_EXAMPLES)
def test_the_spec_encoding_examples_encode_and_decode_like_the_sdk(value, header):
    assert h.encode_value(value) == header == encode_header_value(value)
    assert h.decode_value(header) == value == decode_header_value(header)


ROUND_TRIP_VALUES = [
    "",
    "plain value, with punctuation!",
    "a\tb",
    "\t",
    "trailing ",
    "é",
    "emoji 🎉",
    "\x00",
    "\x7f",
    "=?base64?",
    "?=",
    "=?base64??=",
    "=?base64?=",
    "=?BASE64?QQ==?=",
    "a" * 1000,
]


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES)
def test_every_value_survives_encoding_as_a_header_safe_string_and_decoding_like_the_sdk(value):
    encoded = h.encode_value(value)
    assert encoded == encode_header_value(value)
    assert h.header_safe(encoded)
    assert h.decode_value(encoded) == value == decode_header_value(encoded)


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?not base64!?=",
        "=?base64?QQ?=",  # padding missing
        "=?base64?QR==?=",  # non-canonical: non-zero padding bits
        "=?base64?/w==?=",  # the byte 0xff is not UTF-8
        "=?base64?Q Q==?=",
    ],
)
def test_a_malformed_base64_sentinel_decodes_to_none_like_the_sdk(raw):
    assert h.decode_value(raw) is None
    assert decode_header_value(raw) is None


def test_a_sentinel_with_non_ascii_payload_decodes_to_none_where_the_sdk_raises():
    assert h.decode_value("=?base64?é?=") is None


@pytest.mark.parametrize("raw", ["us-west1", "=?BASE64?QQ==?=", "=?base64?=", "?="])
def test_a_value_without_the_exact_lowercase_sentinel_is_taken_verbatim(raw):
    assert h.decode_value(raw) == raw == decode_header_value(raw)


@pytest.mark.parametrize(
    ("raw", "safe"),
    [("a b\tc~!", True), ("", True), ("a\r\nb", False), ("é", False), ("\x7f", False), ("\x00", False)],
)
def test_a_header_value_is_safe_only_with_visible_ascii_space_and_tab(raw, safe):
    assert h.header_safe(raw) is safe


# --- What a client sends -------------------------------------------------------------------------

EMIT_SCHEMA = obj(
    region=prop("Region"),
    n=prop("N", "integer"),
    dry=prop("Dry-Run", "boolean"),
    text=prop("Text"),
    filter={"type": "object", "properties": {"tenant": prop("Tenant")}},
)

EMIT_ARGUMENTS = [
    {"region": "us-west1", "n": 42, "dry": True, "text": "Hello, 世界", "filter": {"tenant": "acme"}},
    {"region": "eu", "n": -7, "dry": False},
    {"region": None, "n": None, "dry": None, "filter": None},
    {},
    {"filter": "not an object", "text": " padded "},
    {"text": ["a", "list"], "n": 42.0, "region": "=?base64?literal?="},
    {"n": 2**60, "text": "line1\nline2"},
]


@pytest.mark.parametrize("arguments", EMIT_ARGUMENTS)
def test_the_headers_a_client_sends_equal_the_sdks_and_pass_our_check(arguments):
    sent = h.param_header_values(EMIT_SCHEMA, arguments)
    assert sent == mcp_param_headers(x_mcp_header_map(EMIT_SCHEMA), arguments)
    assert h.check_param_headers(EMIT_SCHEMA, arguments, {k.lower(): v for k, v in sent.items()}) is None


def test_a_client_sends_booleans_as_lowercase_words_and_omits_absent_or_null_arguments():
    sent = h.param_header_values(EMIT_SCHEMA, {"region": "us-west1", "dry": False, "n": None})
    assert sent == {"Mcp-Param-Region": "us-west1", "Mcp-Param-Dry-Run": "false"}


# --- What the server checks ----------------------------------------------------------------------

SCHEMA = obj(
    region=prop("Region"),
    n=prop("N", "integer"),
    dry=prop("Dry-Run", "boolean"),
    filter={"type": "object", "properties": {"tenant": prop("Tenant")}},
)

CHECK_CASES = {
    "matching headers": (
        {"region": "us-west1", "n": 42},
        {"mcp-param-region": "us-west1", "mcp-param-n": "42"},
        None,
    ),
    "no annotated argument and no header": ({"other": 1}, {}, None),
    "a base64 header matching its argument": (
        {"region": "世界"},
        {"mcp-param-region": "=?base64?5LiW55WM?="},
        None,
    ),
    "a boolean": ({"dry": True}, {"mcp-param-dry-run": "true"}, None),
    "integer header 42 and body 42.0": ({"n": 42.0}, {"mcp-param-n": "42"}, None),
    "integer header 42.0 and body 42": ({"n": 42}, {"mcp-param-n": "42.0"}, None),
    "a nested argument and its header": ({"filter": {"tenant": "acme"}}, {"mcp-param-tenant": "acme"}, None),
    "a header for an unannotated name is ignored": ({}, {"mcp-param-other": "x"}, None),
    "a different value": (
        {"region": "us-west1"},
        {"mcp-param-region": "eu"},
        "Mcp-Param-Region header 'eu' does not match argument 'region' ('us-west1')",
    ),
    "a missing header": ({"region": "us-west1"}, {}, "Mcp-Param-Region header is missing"),
    "a header without its argument": ({}, {"mcp-param-region": "eu"}, "argument 'region' is absent or null"),
    "a header for a null argument": ({"region": None}, {"mcp-param-region": "eu"}, "absent or null"),
    "a malformed base64 header": ({"region": "eu"}, {"mcp-param-region": "=?base64?QR==?="}, "bad base64"),
    "an integer that differs": (
        {"n": 42},
        {"mcp-param-n": "42.5"},
        "header '42.5' does not match argument 'n'",
    ),
    "a boolean spelled differently": ({"dry": True}, {"mcp-param-dry-run": "True"}, "does not match"),
    "a nested argument that differs": (
        {"filter": {"tenant": "acme"}},
        {"mcp-param-tenant": "evil"},
        "argument 'filter.tenant' ('acme')",
    ),
    "a nested header without its argument": ({"filter": {}}, {"mcp-param-tenant": "acme"}, "'filter.tenant'"),
    "a header with CR LF": ({"region": "eu"}, {"mcp-param-region": "eu\r\nX: 1"}, "characters not allowed"),
    "a header with raw non-ASCII": ({"region": "é"}, {"mcp-param-region": "é"}, "characters not allowed"),
    "a header for an argument that is a list": (
        {"region": ["eu"]},
        {"mcp-param-region": "eu"},
        "not a string",
    ),
}


@pytest.mark.parametrize(("arguments", "headers", "reason"), CHECK_CASES.values(), ids=CHECK_CASES.keys())
def test_the_server_refuses_exactly_the_headers_that_disagree_with_the_arguments(arguments, headers, reason):
    got = h.check_param_headers(SCHEMA, arguments, headers)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


SDK_CHECKS_THIS_TOO = [key for key in CHECK_CASES if "CR LF" not in key and "raw non-ASCII" not in key]


@pytest.mark.parametrize("case", SDK_CHECKS_THIS_TOO)
def test_the_sdk_accepts_and_refuses_the_same_requests(case):
    # The SDK does not check header characters (its HTTP layer does), so those two cases are ours alone.
    arguments, headers, _reason = CHECK_CASES[case]
    ours = h.check_param_headers(SCHEMA, arguments, headers)
    assert (ours is None) == (validate_mcp_param_headers(SCHEMA, arguments, headers) is None)


def test_a_header_sent_twice_is_refused_even_when_each_copy_matches():
    reason = h.check_param_headers(
        SCHEMA, {"region": "eu"}, {"mcp-param-region": "eu"}, duplicated=frozenset({"mcp-param-region"})
    )
    assert reason == "Mcp-Param-Region header is sent more than once; send it once"
    assert (
        h.check_param_headers(SCHEMA, {"region": "eu"}, {"mcp-param-region": "eu"}, frozenset({"other"}))
        is None
    )


def test_a_long_mismatching_value_is_cut_in_the_reason():
    reason = h.check_param_headers(SCHEMA, {"region": "a" * 5000}, {"mcp-param-region": "b" * 5000})
    assert "…" in reason and len(reason) < 300


def test_integers_past_two_to_the_53_still_compare_exactly():
    big = 2**60
    assert h.check_param_headers(SCHEMA, {"n": big}, {"mcp-param-n": str(big)}) is None
    assert h.check_param_headers(SCHEMA, {"n": big}, {"mcp-param-n": str(big + 1)}) is not None


def test_the_module_does_not_import_the_sdk_or_anything_outside_the_standard_library_and_core():
    tree = ast.parse(Path(h.__file__).read_text())
    modules = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert modules <= {
        "__future__",
        "base64",
        "binascii",
        "re",
        "collections.abc",
        "typing",
        "mcp_app.core.errors",
    }
