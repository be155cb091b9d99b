"""Where the http kind puts each argument: the URL's path, the query, a header, or the JSON body.

Without ``parameters`` and ``body`` in ``handler_config`` nothing changes: the arguments are the JSON
body (POST, PUT, PATCH) or the query (GET, DELETE). With them (what an OpenAPI operation needs, made
by ``mcp_app/portability/openapi.py``, AMB-58):

- ``"parameters": {"petId": {"in": "path"}, "limit": {"in": "query"}, "trace": {"in": "header",
  "name": "X-Trace-Id"}}``: each argument named there fills ``{name}`` in the URL's path (percent-
  encoded, so a value cannot leave its segment), goes in the query (a list repeats the key, the
  OpenAPI default ``form``/``explode``), or is sent as a header; ``name`` is the name on the wire when
  it differs from the argument's.
- ``"body": "pet"``: the argument ``pet`` is the whole JSON body, and any other argument goes in the
  query. Without it, the remaining arguments are the body (POST, PUT, PATCH; none when nothing
  remains) or the query (GET, DELETE).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from mcp_app.core.errors import ToolError

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@dataclass
class Request:
    """The parts of one upstream request built from a call's arguments."""

    url: str
    params: dict[str, Any] | None = None
    json_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def uses_placement(config: dict[str, Any]) -> bool:
    return "parameters" in config or "body" in config


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def build(config: dict[str, Any], url: str, query_method: bool, arguments: dict[str, Any]) -> Request:
    """Place each argument as the config says (``uses_placement``); ToolError for a value that cannot go there."""
    declared: dict[str, dict[str, str]] = config.get("parameters") or {}
    body_name = config.get("body")
    request = Request(url)
    query: dict[str, Any] = {}
    rest = {k: v for k, v in arguments.items() if k not in declared and k != body_name}
    for argument, spec in declared.items():
        wire = spec.get("name") or argument
        if spec["in"] == "path":
            request.url = request.url.replace("{" + wire + "}", _segment(argument, arguments.get(argument)))
        elif argument not in arguments:
            continue
        elif spec["in"] == "query":
            value = arguments[argument]
            query[wire] = [_text(v) for v in value] if isinstance(value, list) else _text(value)
        else:
            value = _text(arguments[argument])
            if any(c in value for c in "\r\n\0"):
                raise ToolError(f"The argument {argument!r} cannot be sent as a header: it has a line break.")
            request.headers[wire] = value
    if body_name:
        request.json_body = arguments.get(body_name)
    if body_name or query_method:
        query.update({k: _text(v) for k, v in rest.items()})
    elif rest:
        request.json_body = rest
    request.params = query or None
    return request


def _segment(argument: str, value: Any) -> str:
    if value is None:
        raise ToolError(f"The argument {argument!r} is needed: it is part of the URL.")
    text = _text(value)
    if text in ("", ".", ".."):
        raise ToolError(f"The argument {argument!r} cannot be {text!r}: it is a segment of the URL's path.")
    return quote(text, safe="")


def problems(config: dict[str, Any], url: str, reserved: frozenset[str], secret: frozenset[str]) -> list[str]:
    """Check ``parameters`` and ``body`` against the URL and each other; their shapes are the schema's.

    By hand: a placeholder of the URL's path needs a path parameter (two fields compared), and header
    names compare without case against the http kind's lists.
    """
    declared = config.get("parameters", {})
    if not isinstance(declared, dict):
        declared = {}
    found: list[str] = []
    path_names = set()
    for argument, spec in declared.items():
        if not isinstance(spec, dict):
            continue
        wire = spec.get("name", argument)
        if spec.get("in") == "path" and isinstance(wire, str):
            path_names.add(wire)
        if spec.get("in") != "header" or not isinstance(wire, str):
            continue
        if "name" not in spec and not _HEADER_NAME.match(wire):  # the schema checks a given "name"
            found.append(f"Parameter {argument!r}: {wire!r} is not a valid header name.")
        if wire.lower() in reserved or wire.lower() in secret:
            found.append(
                f"Parameter {argument!r}: the header {wire!r} is set by the platform or is a secret header."
            )
    if config.get("body") in declared:
        found.append("'body' must name the argument sent as the JSON body (not also a parameter).")
    parts = urlsplit(url)
    if "{" in parts.netloc or "}" in parts.netloc:
        found.append("Only the URL's path may hold {placeholders}, not its host.")
    placeholders = set(_PLACEHOLDER.findall(parts.path))
    if placeholders != path_names:
        missing, unused = sorted(placeholders - path_names), sorted(path_names - placeholders)
        found.append(
            "Each {placeholder} of the URL's path needs a path parameter and each path parameter a "
            f"placeholder (no parameter for: {', '.join(missing) or 'none'}; no placeholder for: "
            f"{', '.join(unused) or 'none'})."
        )
    return found
