"""The `x-mcp-header` rules of MCP 2026-07-28 (basic/transports/streamable-http.mdx).

A tool may mark input properties with `"x-mcp-header": "Region"`; a conforming client then mirrors
the argument into an `Mcp-Param-Region` HTTP header, so intermediaries (load balancers, gateways)
can route on it without reading the body. Because two components may then trust two sources of
truth, the server must refuse a request whose headers and body disagree (`HeaderMismatch`).

This module is that whole rulebook in one place, pure (no I/O, no Django, no `mcp` SDK):
the schema rules the admin enforces, the `=?base64?…?=` value codec, the headers a conforming
client sends, and the server's comparison of headers against arguments. The SDK's
`mcp.shared.inbound` is the reference; tests/core/test_mcp_headers.py proves we agree with it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any

from mcp_app.core.errors import cut

# Method → params key mirrored into the `Mcp-Name` header (spec "Standard Request Headers").
NAME_BEARING_METHODS: dict[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension ("Streamable HTTP: Routing Headers"): Mcp-Name carries params.taskId.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

ANNOTATION = "x-mcp-header"
PARAM_HEADER_PREFIX = "Mcp-Param-"
# Longest header or argument value echoed back in a HeaderMismatch reason.
MAX_ECHO_CHARS = 100

# The sentinel markers are case-sensitive and must appear exactly like this (spec "Value Encoding").
_SENTINEL_START = "=?base64?"
_SENTINEL_END = "?="
# RFC 9110 §5.5 field value: visible ASCII, space and horizontal tab; anything else is refused.
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
# Values a client may send verbatim: visible ASCII and space (a tab is a control character).
_PLAIN_VALUE = re.compile(r"[\x20-\x7e]*")
# RFC 9110 §5.6.2 token (1*tchar): the only characters an HTTP field name may hold.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Header values eligible for numeric comparison with an integer argument ("42", "-7", "42.0").
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# Property types an annotation may sit on; `number` is forbidden (float→str is not portable).
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})

# JSON Schema keywords whose values are subschemas (2020-12 plus draft-07's spellings), by value shape.
# Only `properties` keeps an annotation statically reachable; crossing any of these makes it invalid.
# Instance data (`default`, `const`, `enum`, `examples`) is never entered, and `$ref` is not followed.
_SUBSCHEMA_KEYWORDS = frozenset(
    {
        "items",  # a schema, or (draft-07) a list of schemas
        "additionalItems",
        "prefixItems",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_MAP_KEYWORDS = frozenset(
    {"patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
)


# --- Value encoding ------------------------------------------------------------------------------


def header_safe(raw: str) -> bool:
    """True when `raw` is a legal RFC 9110 field value: visible ASCII, space and tab only.

    The server must refuse a recognized `Mcp-Param-*` header holding anything else (CR/LF, other
    control characters, raw non-ASCII bytes): such a value was not produced by a conforming client.
    """
    return _FIELD_VALUE.fullmatch(raw) is not None


def _is_sentinel(text: str) -> bool:
    return (
        text.startswith(_SENTINEL_START)
        and text.endswith(_SENTINEL_END)
        and len(text) >= len(_SENTINEL_START) + len(_SENTINEL_END)
    )


def encode_value(value: str) -> str:
    """The header form of `value`: verbatim when it survives HTTP unchanged, else `=?base64?…?=`.

    Base64 (of the UTF-8 bytes) is required for non-ASCII, control characters and leading/trailing
    whitespace (which HTTP parsers strip), and for a plain value that already looks like the
    sentinel, so the receiver never mistakes it for an encoded one.
    """
    if _PLAIN_VALUE.fullmatch(value) and value == value.strip() and not _is_sentinel(value):
        return value
    return f"{_SENTINEL_START}{base64.b64encode(value.encode('utf-8')).decode('ascii')}{_SENTINEL_END}"


def decode_value(raw: str) -> str | None:
    """The value `raw` carries: the sentinel's payload decoded, or `raw` itself when not encoded.

    None for a sentinel whose payload is not canonical base64 of UTF-8 text: a conforming
    encoder never emits one, and a corrupt header must never match a body value by accident.
    """
    if not _is_sentinel(raw):
        return raw
    payload = raw[len(_SENTINEL_START) : -len(_SENTINEL_END)]
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII characters in the payload
        return None
    # validate=True still tolerates non-zero padding bits ("QR==" and "QQ==" both give b"A").
    if base64.b64encode(data).decode("ascii") != payload:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- Schema rules --------------------------------------------------------------------------------


def _pointer(parts: tuple[str, ...]) -> str:
    """A JSON Pointer fragment (`#/properties/a~1b`) naming a schema location for the tenant."""
    return "#" + "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def _schema_positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, tuple[str, ...], dict[str, Any]]]:
    """Yield `(argument path, location, schema)` for every subschema of `root`, in document order.

    The argument path is the chain of `properties` keys leading to the subschema, or None once
    any other keyword has been crossed (then the position is not statically reachable). An
    explicit stack keeps the walk total on arbitrarily deep input.
    """
    stack: list[tuple[tuple[str, ...] | None, tuple[str, ...], Any]] = [((), (), root)]
    while stack:
        path, where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, where, node
        children: list[tuple[tuple[str, ...] | None, tuple[str, ...], Any]] = []
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    child = (*path, name) if path is not None else None
                    children.append((child, (*where, keyword, name), sub))
            elif keyword in _SUBSCHEMA_KEYWORDS and isinstance(value, list):
                children += [(None, (*where, keyword, str(i)), sub) for i, sub in enumerate(value)]
            elif keyword in _SUBSCHEMA_KEYWORDS:
                children.append((None, (*where, keyword), value))
            elif keyword in _SUBSCHEMA_MAP_KEYWORDS and isinstance(value, dict):
                children += [(None, (*where, keyword, name), sub) for name, sub in value.items()]
        stack.extend(reversed(children))


def _annotation_problem(token: Any, schema: dict[str, Any]) -> str | None:
    """Why one annotation on a reachable property is invalid (uniqueness aside), else None."""
    if not isinstance(token, str):
        return f"must be a string, not {type(token).__name__}"
    if not token:
        return "must not be empty"
    if _CONTROL.search(token):
        return "must not contain control characters such as CR or LF"
    if not _TOKEN.fullmatch(token):
        return "is not an HTTP header name token (letters, digits and !#$%&'*+-.^_`|~ only, no spaces)"
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _HEADER_TYPES:
        found = "it has none" if kind is None else f"not {kind!r}"
        return f'needs its property to have "type" "string", "integer" or "boolean" ({found})'
    return None


def invalid_x_mcp_header(input_schema: Any) -> str | None:
    """Why the schema's `x-mcp-header` annotations break the spec's rules, or None when they don't.

    The reason names the schema location, for the tenant fixing the tool in the admin. A
    conforming client drops a tool that breaks these rules from `tools/list`, so we refuse to
    publish one. A non-object schema has no annotations and returns None (its own check reports it).
    """
    seen: dict[str, str] = {}
    for path, where, schema in _schema_positions(input_schema):
        if ANNOTATION not in schema:
            continue
        token = schema[ANNOTATION]
        label = f"{ANNOTATION} {cut(token, MAX_ECHO_CHARS)!r}" if isinstance(token, str) else ANNOTATION
        if not path:  # None: crossed items/oneOf/$defs/…; (): the root, which is not a property
            location = _pointer(where) if where else "the schema root (#)"
            return (
                f"{label} at {location} is not on a statically reachable property: only a chain of "
                f'"properties" may lead to it (not items, oneOf/anyOf/allOf, not, if/then/else, $defs, '
                "additionalProperties, patternProperties, …)"
            )
        problem = _annotation_problem(token, schema)
        if problem is not None:
            return f"{label} on property {_pointer(where)} {problem}"
        first = seen.setdefault(token.lower(), _pointer(where))
        if first != _pointer(where):
            return f"{label} on property {_pointer(where)} repeats the header of {first} (names ignore case)"
    return None


def _annotations(input_schema: Any) -> Iterator[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """`(argument path, token, property schema)` for each string annotation on a reachable property."""
    for path, _where, schema in _schema_positions(input_schema):
        token = schema.get(ANNOTATION)
        if path and isinstance(token, str):
            yield path, token, schema


def param_headers(input_schema: Any) -> dict[tuple[str, ...], str]:
    """Argument path (chain of `properties` keys) → `x-mcp-header` token, for a valid schema.

    On a schema `invalid_x_mcp_header` refuses, it still lists the reachable string annotations
    (the ones `check_param_headers` enforces), though no conforming client would call the tool.
    """
    return {path: token for path, token, _schema in _annotations(input_schema)}


# --- Client emit and server check --------------------------------------------------------------


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    """The argument at `path`, or None when a step is missing or not an object."""
    node = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _render(value: Any) -> str | None:
    """The header text of an argument before encoding (bool as true/false), or None if it has none."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float):
        return None
    try:
        return str(value)
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return None


def param_header_values(input_schema: Any, arguments: Any) -> dict[str, str]:
    """The `Mcp-Param-<Token>` headers a conforming client sends for these arguments, encoded.

    A header is omitted when its argument is absent or null (spec table "Server Behavior for
    Custom Headers"), or is not a scalar (objects and lists have no header form).
    """
    headers: dict[str, str] = {}
    for path, token in param_headers(input_schema).items():
        value = _value_at(arguments, path)
        rendered = None if value is None else _render(value)
        if rendered is not None:
            headers[f"{PARAM_HEADER_PREFIX}{token}"] = encode_value(rendered)
    return headers


def _matches(kind: Any, value: Any, rendered: str, decoded: str) -> bool:
    """True when the decoded header agrees with the argument.

    An integer property compares numerically (spec: `42` and `42.0` are equal), exactly on the
    digits (no float round trip, so integers past 2**53 still compare); everything else as text.
    """
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "integer" and integral and not isinstance(value, bool) and _DECIMAL.fullmatch(decoded):
        whole, _dot, fraction = decoded.partition(".")
        try:
            return fraction.strip("0") == "" and int(whole) == int(value)
        except ValueError:  # more digits than sys.get_int_max_str_digits() allows
            return False
    return decoded == rendered


def check_param_headers(
    input_schema: Any,
    arguments: Any,
    headers: Mapping[str, str],
    duplicated: frozenset[str] = frozenset(),
) -> str | None:
    """Why the request's `Mcp-Param-*` headers disagree with its arguments (a HeaderMismatch), or None.

    `headers` is keyed by lowercase name; `duplicated` holds the lowercase names sent more than
    once (a mapping cannot show that, and first-copy and last-copy readers would disagree). Each
    annotated argument and its header must be present together and equal after decoding, or
    absent together (null counts as absent). A header for an argument the body lacks is refused
    too: that is exactly the value an intermediary could have routed on. The reason is written
    for the client developer who reads it in the error. On a schema `invalid_x_mcp_header`
    refuses, the reachable annotations are still enforced (fail closed; the SDK checks none there).
    """
    for path, token, schema in _annotations(input_schema):
        name = f"{PARAM_HEADER_PREFIX}{token}"
        key = name.lower()
        raw = headers.get(key)
        argument = ".".join(path)
        if key in duplicated:
            return f"{name} header is sent more than once; send it once"
        if raw is not None and not header_safe(raw):
            return (
                f"{name} header contains characters not allowed in a header value; "
                f"send such values as {_SENTINEL_START}<base64 of UTF-8>{_SENTINEL_END}"
            )
        value = _value_at(arguments, path)
        if value is None:
            if raw is not None:
                return f"{name} header is sent but argument {argument!r} is absent or null"
            continue
        rendered = _render(value)
        if rendered is None:  # no header form: a conforming client sends none
            if raw is not None:
                return f"{name} header is sent but argument {argument!r} is not a string, integer or boolean"
            continue
        if raw is None:
            return f"{name} header is missing; argument {argument!r} is present"
        decoded = decode_value(raw)
        if decoded is None:
            return f"{name} header is not valid {_SENTINEL_START}…{_SENTINEL_END} (bad base64 or not UTF-8)"
        if not _matches(schema.get("type"), value, rendered, decoded):
            shown, expected = cut(decoded, MAX_ECHO_CHARS), cut(rendered, MAX_ECHO_CHARS)
            return f"{name} header {shown!r} does not match argument {argument!r} ({expected!r})"
    return None
