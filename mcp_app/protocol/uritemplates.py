"""Match a concrete URI against an RFC 6570 URI template and extract its variables (RS-03).

uritemplate parses the expressions; each one is compiled to a regular expression here, since the
library only expands. Supported: `{var}` and `{a,b}` (simple), `{+var}` (reserved), `{#var}`,
`{.var}`, `{/var}`, `{;var}`, `{?a,b}` and `{&a,b}`; prefix (`:n`) and explode (`*`) modifiers are
accepted, an exploded value is returned as its raw text. Values are percent-decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl, unquote

from uritemplate import URITemplate

# Longer URIs never match: bounds the work the (backtracking) patterns can do.
MAX_URI_LENGTH = 4096

_SIMPLE = r"[^/?#,&]+"  # a simple expansion percent-encodes every reserved character


@dataclass(frozen=True)
class CompiledTemplate:
    pattern: re.Pattern[str] | None
    # Query-style variables ({?a,b} / {&a,b}) are read from the query string, in any order.
    query_names: tuple[str, ...]
    names: tuple[str, ...]


def _expression(operator: str, names: list[str], start: int) -> str:
    groups = [f"v{start + i}" for i in range(len(names))]
    if operator == "":
        return ",".join(f"(?P<{g}>{_SIMPLE})" for g in groups)
    if operator == "+":
        return ",".join(f"(?P<{g}>[^?#]+?)" for g in groups)
    if operator == "#":
        return "(?:#" + ",".join(f"(?P<{g}>.*?)" for g in groups) + ")?"
    if operator == ".":
        return "".join(rf"(?:\.(?P<{g}>[^/?#.]*))?" for g in groups)
    if operator == "/":
        return "".join(f"(?:/(?P<{g}>[^/?#]*))?" for g in groups)
    if operator == ";":
        return "".join(
            f"(?:;{re.escape(n)}(?:=(?P<{g}>[^;/?#]*))?)?" for n, g in zip(names, groups, strict=True)
        )
    raise ValueError(f"unsupported URI template operator {operator!r}")


@lru_cache(maxsize=1024)
def compile_template(template: str) -> CompiledTemplate:
    """Compile `template` once; a template we cannot parse compiles to one that matches nothing."""
    try:
        variables = URITemplate(template).variables
    except Exception:
        return CompiledTemplate(None, (), ())
    regex: list[str] = []
    names: list[str] = []
    query_names: list[str] = []
    position = 0
    query_seen = False
    for variable in variables:
        literal_at = template.index("{" + variable.original + "}", position)
        regex.append(re.escape(template[position:literal_at]))
        position = literal_at + len(variable.original) + 2
        operator = variable.operator.value
        var_names = list(variable.variable_names)
        if operator in ("?", "&"):
            # Everything from here to the fragment is the query; it must be the template's tail.
            if not query_seen:
                regex.append(r"(?:\?(?P<query>[^#]*))?")
                query_seen = True
            query_names.extend(var_names)
            continue
        try:
            regex.append(_expression(operator, var_names, len(names)))
        except ValueError:
            return CompiledTemplate(None, (), ())
        names.extend(var_names)
    regex.append(re.escape(template[position:]))
    return CompiledTemplate(re.compile("".join(regex) + r"\Z", re.DOTALL), tuple(query_names), tuple(names))


def match(template: str, uri: str) -> dict[str, str] | None:
    """Return the variables when `uri` is an expansion of `template`, else None."""
    if len(uri) > MAX_URI_LENGTH:
        return None
    compiled = compile_template(template)
    if compiled.pattern is None:
        return None
    found = compiled.pattern.match(uri)
    if found is None:
        return None
    values: dict[str, str] = {}
    for index, name in enumerate(compiled.names):
        value = found.group(f"v{index}")
        if value is not None:
            values[name] = unquote(value)
    if compiled.query_names:
        query = found.group("query") or ""
        wanted = set(compiled.query_names)
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key in wanted and key not in values:
                values[key] = value
    return values


def variable_names(template: str) -> tuple[str, ...]:
    """Every variable a template names, in order."""
    compiled = compile_template(template)
    return compiled.names + compiled.query_names
