"""How deep JSON and YAML may nest wherever the platform reads them: one limit, one place (AMB-115).

Parsers recurse once per level (the json module in C, PyYAML's composer in Python): 100,000 "["
would end in a RecursionError deep in the stack. Every entry point reads through here, which
refuses past ``limit()`` levels before parsing. A definition's own JSON fields get ``FRAME`` levels
less, the room an API body, a tenant document or a JSON-RPC message needs around them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from django.conf import settings

# Levels kept free around a stored definition field (a tenant document puts a tool's input schema
# 3 deep: tools → [i] → input_schema), so what was saved can be exported and imported again.
FRAME = 8
# Nodes YAML aliases may add in all: `b: &b [*a, *a]` doubles per line, billions in a few hundred bytes.
MAX_ALIAS_NODES = 100_000

# Escapes go first (a backslash is only valid inside a string, and a parser stops at one outside),
# then strings, their closing quote optional: an unterminated one runs to the end once instead of
# being retried from every quote after it (quadratic on `"\"\"\"…`, as the transport's scan was).
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"?')
# A parser reads from the start: nesting past the limit in the first part needs no look at the rest.
_PREFIX = 65_536
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PARENS = bytes.maketrans(b"[{]}", b"(())")


class TooDeep(ValueError):
    """The text nests deeper than the limit (a ValueError, as a parser's own complaints are)."""

    def __init__(self, limit: int, message: str = "") -> None:
        super().__init__(message or f"nested deeper than {limit} levels")
        self.limit = limit


def limit() -> int:
    """The deepest nesting accepted anywhere (MCP_MAX_JSON_DEPTH)."""
    return settings.MCP_MAX_JSON_DEPTH


def definition_limit() -> int:
    """The deepest nesting of a definition's own JSON field (a schema, a config, messages)."""
    return limit() - FRAME


def json_depth_exceeds(text: str, max_depth: int) -> bool:
    """True when arrays/objects nest deeper than `max_depth`, found in linear time without parsing.

    Exact for valid JSON; for invalid JSON it never says less than a parser reading from the start
    would reach before failing.
    """
    if text.count("[") + text.count("{") <= max_depth:  # the common case: no scan at all
        return False
    if len(text) > _PREFIX and _exceeds(text[:_PREFIX], max_depth):
        return True
    return _exceeds(text, max_depth)


def _exceeds(text: str, max_depth: int) -> bool:
    parens = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text))).encode("ascii").translate(_PARENS)
    # Each pass drops the innermost pairs (every replace runs in C over the whole text), so valid
    # JSON of depth d empties in d passes; opens left unclosed each add one more level at most.
    passes = 0
    while b"()" in parens:
        passes += 1
        if passes > max_depth:
            return True
        parens = parens.replace(b"()", b"")
    return passes + parens.count(b"(") > max_depth


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str | bytes, max_depth: int | None = None) -> Any:
    """Parse JSON text (bytes: UTF-8) no deeper than the limit; ValueError (TooDeep past it) otherwise.

    NaN and Infinity are refused: they are not JSON, and no client could read them back.
    """
    max_depth = limit() if max_depth is None else max_depth
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError too
    if json_depth_exceeds(text, max_depth):
        raise TooDeep(max_depth)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # an operator's limit above the interpreter's stack
        raise TooDeep(max_depth) from None


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when a parsed value's lists/dicts nest deeper than `max_depth` (iterative: no recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader whose composer stops past the depth limit, counting aliases where used."""

    def __init__(self, stream: str, max_depth: int) -> None:
        super().__init__(stream)
        self.max_depth = max_depth
        self.depth = 0
        self.heights: dict[int, int] = {}  # id(collection node) → its height, once composed
        self.sizes: dict[int, int] = {}  # id(node) → nodes it stands for, aliases expanded
        self.aliased = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.CollectionNode) and id(node) not in self.heights:
                raise TooDeep(
                    self.max_depth, "a YAML alias is used inside its own anchor: it nests without end"
                )
            if self.depth + self.heights.get(id(node), 0) > self.max_depth:
                raise TooDeep(self.max_depth)
            self.aliased += self.sizes.get(id(node), 1)
            if self.aliased > MAX_ALIAS_NODES:
                raise TooDeep(
                    self.max_depth, f"YAML aliases repeat more than {MAX_ALIAS_NODES:,} values in all"
                )
            return node
        collection = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if not collection:
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > self.max_depth:
            raise TooDeep(self.max_depth)
        node = super().compose_node(parent, index)
        self.depth -= 1
        assert node is not None, "a collection's start event composes a node"
        children = (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        )
        self.heights[id(node)] = 1 + max((self.heights.get(id(c), 0) for c in children), default=0)
        self.sizes[id(node)] = 1 + sum(self.sizes.get(id(c), 1) for c in children)
        return node


def yaml_loads(text: str, max_depth: int | None = None) -> Any:
    """Parse YAML (JSON is YAML) safely, no deeper than the limit; yaml.YAMLError or TooDeep otherwise."""
    loader = _BoundedLoader(text, limit() if max_depth is None else max_depth)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
