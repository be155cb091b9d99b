"""Read an OpenAPI 3.0/3.1 description and describe one ``http`` tool per operation (AMB-57, AMB-58).

Per operation: the tool's name from ``operationId`` (made to fit the tool-name rule, de-duplicated),
its title and description from ``summary``/``description``, its input schema from the path, query
and header parameters and the JSON request body (an object body's properties become arguments
beside the parameters; any other body is the ``body`` argument), its output schema from the first
2xx JSON response when that is an object, and the http kind's ``parameters``/``body`` placement
(``mcp_app/handlers/http_params.py``). Every ``$ref`` inside the document is looked up with
``referencing`` (JSON pointers with their escapes and percent-encoding) and inlined; a recursive one
is cut where it recurs (an unconstrained schema saying so) and the whole expansion is bounded, so a
hostile document cannot make the import run away; a reference outside the document is refused. OpenAPI 3.0's ``nullable`` and boolean
``exclusiveMinimum``/``exclusiveMaximum`` become their JSON Schema 2020-12 forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

METHODS = ("get", "put", "post", "delete", "patch")
UNSUPPORTED_METHODS = ("head", "options", "trace")
# How many $ref a schema may nest, and how many schema nodes one document may expand to in all.
MAX_REF_DEPTH = 16
MAX_NODES = 50_000
# Keywords of OpenAPI's Schema Object that are not JSON Schema validation (dropped from tool schemas).
_DROPPED = frozenset({"example", "xml", "externalDocs", "discriminator", "nullable"})
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = (
    "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "additionalItems",
)  # fmt: skip
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
# Headers OpenAPI says a header parameter never describes (the client sets them).
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


class OpenApiError(Exception):
    """The document, or one of its operations, cannot become tools; the message says why."""


@dataclass
class Operation:
    """One operation of the document, as the tool it becomes (``reason`` says why it cannot)."""

    method: str
    path: str
    name: str
    title: str = ""
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    parameters: dict[str, dict[str, str]] = field(default_factory=dict)
    body: str | None = None
    notes: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def key(self) -> str:
        return f"{self.method.upper()} {self.path}"

    @property
    def supported(self) -> bool:
        return not self.reason

    def handler_config(self, base_url: str, timeout: float) -> dict[str, Any]:
        config: dict[str, Any] = {
            "url": base_url.rstrip("/") + self.path,
            "method": self.method.upper(),
            "timeout": timeout,
            "parameters": self.parameters,
        }
        if self.body:
            config["body"] = self.body
        return config

    def annotations(self) -> dict[str, bool]:
        hints = {"get": "readOnlyHint", "delete": "destructiveHint", "put": "idempotentHint"}
        out = {"openWorldHint": True}
        if self.method in hints:
            out[hints[self.method]] = True
        return out


@dataclass
class Description:
    """A parsed OpenAPI document: its title, server URLs and operations."""

    title: str
    version: str
    servers: list[str]
    operations: list[Operation]

    def by_key(self) -> dict[str, Operation]:
        return {op.key: op for op in self.operations}


# Where the document sits in its reference registry: refs resolve against it, and none leaves it.
_DOCUMENT_URI = "urn:mcp:openapi-document"


class _Resolver:
    """Inline the document's ``$ref``s (looked up by ``referencing``), cutting recursion and bounding
    the total expansion, which a lookup library does not do."""

    def __init__(self, document: dict[str, Any]) -> None:
        # No retrieve function: a reference to anything but this document is Unresolvable.
        resource = DRAFT202012.create_resource(document)
        self.resolver = Registry().with_resource(_DOCUMENT_URI, resource).resolver(base_uri=_DOCUMENT_URI)
        self.nodes = 0

    def target(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise OpenApiError(
                f"The reference {ref!r} points outside the document; only local '#/…' ones are read."
            )
        try:
            return self.resolver.lookup(ref).contents
        except Unresolvable:
            raise OpenApiError(f"The reference {ref!r} points to nothing in the document.") from None

    def deref(self, node: Any) -> Any:
        """A Parameter, Request Body or Response Object, following its ``$ref`` chain."""
        seen: set[str] = set()
        while isinstance(node, dict) and "$ref" in node:
            if node["$ref"] in seen:
                raise OpenApiError(f"The reference {node['$ref']!r} refers to itself.")
            seen.add(node["$ref"])
            node = self.target(node["$ref"])
        return node

    def schema(self, node: Any, stack: tuple[str, ...] = ()) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise OpenApiError(
                f"Its schemas expand to more than {MAX_NODES} nodes; it is too large to import."
            )
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            if ref in stack or len(stack) >= MAX_REF_DEPTH:
                name = str(ref).rsplit("/", 1)[-1]
                return {"description": f"A {name} (recursive: not expanded further)."}
            resolved = self.schema(self.target(ref), (*stack, ref))
            siblings = self.schema({k: v for k, v in node.items() if k != "$ref"}, stack)
            return {**resolved, **siblings} if isinstance(resolved, dict) else resolved
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: self.schema(sub, stack) for name, sub in value.items()}
            elif key in _SCHEMA_ONE:
                out[key] = self.schema(value, stack)
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.schema(sub, stack) for sub in value]
            else:
                out[key] = value
        return _from_openapi_30(node, out)


def _from_openapi_30(original: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0's ``nullable`` and boolean exclusive bounds, in JSON Schema 2020-12 terms."""
    if original.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and bound in out:
            out[exclusive] = out.pop(bound)
    return out


def is_object(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "object":
        return True
    if "type" in schema:
        return False
    parts = schema.get("allOf")
    return "properties" in schema or (isinstance(parts, list) and bool(parts) and all(map(is_object, parts)))


def tool_name(raw: str, taken: set[str]) -> str:
    """``raw`` made to fit the tool-name rule (1-64 of letters, digits, ``_.-``), unique among ``taken``."""
    base = _NAME_BAD.sub("_", raw).strip("_") or "operation"
    name, n = base[:64], 1
    while name.lower() in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: 64 - len(suffix)] + suffix
    taken.add(name.lower())
    return name


def _server_urls(document: dict[str, Any], source_url: str) -> list[str]:
    urls = []
    for server in document.get("servers") or []:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            continue
        url = server["url"]
        for name, variable in (server.get("variables") or {}).items():
            if isinstance(variable, dict) and "default" in variable:
                url = url.replace("{" + name + "}", str(variable["default"]))
        if source_url and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
            url = urljoin(source_url, url)
        urls.append(url)
    return urls


def _json_media(content: Any) -> tuple[str, Any] | None:
    if not isinstance(content, dict):
        return None
    for mime, media in content.items():
        base = mime.split(";", 1)[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return mime, media if isinstance(media, dict) else {}
    return None


def parse(document: Any, source_url: str = "") -> Description:
    """Check the document is OpenAPI 3.0 or 3.1 and describe each operation (OpenApiError if not)."""
    if not isinstance(document, dict):
        raise OpenApiError("This is not an OpenAPI document (expected an object with 'openapi' and 'paths').")
    if "swagger" in document:
        raise OpenApiError("Swagger 2.0 documents are not read: convert it to OpenAPI 3 first.")
    version = str(document.get("openapi", ""))
    if not re.match(r"^3\.[01]\.", version):
        raise OpenApiError(
            f"Only OpenAPI 3.0 and 3.1 are read; this document says openapi: {version or 'nothing'}."
        )
    paths = document.get("paths")
    if not isinstance(paths, dict):
        raise OpenApiError("The document has no 'paths' object.")
    info = found if isinstance(found := document.get("info"), dict) else {}
    resolver = _Resolver(document)
    taken: set[str] = set()
    operations = []
    for path, item in paths.items():
        item = resolver.deref(item)
        if not isinstance(item, dict):
            continue
        for method, operation in item.items():
            if method in UNSUPPORTED_METHODS:
                op = Operation(method, path, tool_name(f"{method}_{path}", taken))
                op.reason = f"{method.upper()} is not a method the http kind sends."
                operations.append(op)
            elif method in METHODS and isinstance(operation, dict):
                operations.append(_operation(resolver, path, method, item, operation, taken))
    return Description(
        str(info.get("title", "")),
        str(info.get("version", "")),
        _server_urls(document, source_url),
        operations,
    )


def _operation(
    resolver: _Resolver,
    path: str,
    method: str,
    item: dict[str, Any],
    operation: dict[str, Any],
    taken: set[str],
) -> Operation:
    raw_name = operation.get("operationId") or f"{method}_{path}"
    op = Operation(method, path, tool_name(str(raw_name), taken))
    summary, description = (
        str(operation.get("summary") or "").strip(),
        str(operation.get("description") or "").strip(),
    )
    op.title = summary[:200]
    op.description = "\n\n".join(part for part in (summary, description) if part)
    try:
        _inputs(resolver, op, item, operation)
        op.output_schema = _output(resolver, operation)
    except OpenApiError as exc:
        op.reason = str(exc)
    return op


def _parameters(resolver: _Resolver, item: dict[str, Any], operation: dict[str, Any]) -> list[dict[str, Any]]:
    """The path item's parameters overridden by the operation's (same name and location)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or []), *(operation.get("parameters") or [])]:
        parameter = resolver.deref(raw)
        if isinstance(parameter, dict) and isinstance(parameter.get("name"), str):
            merged[(parameter["name"], str(parameter.get("in")))] = parameter
    return list(merged.values())


def _inputs(resolver: _Resolver, op: Operation, item: dict[str, Any], operation: dict[str, Any]) -> None:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in _parameters(resolver, item, operation):
        name, where = parameter["name"], parameter.get("in")
        if where == "cookie" or (where == "header" and name.lower() in _IGNORED_HEADERS):
            op.notes.append(f"The {where} parameter {name!r} is not sent.")
            continue
        if where not in ("path", "query", "header"):
            continue
        argument = name if name not in properties else f"{name}_{where}"
        schema = parameter.get("schema")
        if schema is None and (media := _json_media(parameter.get("content"))):
            schema = media[1].get("schema")
        schema = resolver.schema(schema if isinstance(schema, dict) else {})
        if parameter.get("description") and "description" not in schema:
            schema = {**schema, "description": str(parameter["description"])}
        properties[argument] = schema
        if parameter.get("required") or where == "path":
            required.append(argument)
        op.parameters[argument] = {"in": where, **({"name": name} if argument != name else {})}
    _request_body(resolver, op, operation, properties, required)
    op.input_schema = {
        "type": "object",
        "properties": properties,
        **({"required": required} if required else {}),
    }


def _request_body(
    resolver: _Resolver,
    op: Operation,
    operation: dict[str, Any],
    properties: dict[str, Any],
    required: list[str],
) -> None:
    body = resolver.deref(operation.get("requestBody"))
    if not isinstance(body, dict) or not body.get("content"):
        return
    media = _json_media(body["content"])
    if media is None:
        kinds = ", ".join(sorted(body["content"])) if isinstance(body["content"], dict) else "?"
        raise OpenApiError(f"Its request body is {kinds}; the http kind sends JSON bodies only.")
    schema = resolver.schema(media[1].get("schema") or {})
    inner = schema.get("properties") if isinstance(schema, dict) else None
    if (
        schema.get("type") == "object"
        and isinstance(inner, dict)
        and inner
        and not set(inner) & set(properties)
    ):
        properties.update(inner)
        required += [name for name in schema.get("required") or [] if name in inner]
        return
    argument = "body" if "body" not in properties else "request_body"
    if body.get("description") and isinstance(schema, dict) and "description" not in schema:
        schema = {**schema, "description": str(body["description"])}
    properties[argument] = schema
    if body.get("required"):
        required.append(argument)
    op.body = argument


def _output(resolver: _Resolver, operation: dict[str, Any]) -> dict[str, Any] | None:
    responses = found if isinstance(found := operation.get("responses"), dict) else {}
    for status in sorted(str(s) for s in responses):
        if not (status.startswith("2") and len(status) == 3):
            continue
        response = resolver.deref(
            responses.get(status, responses.get(int(status) if status.isdigit() else status))
        )
        media = _json_media(response.get("content")) if isinstance(response, dict) else None
        if media is None:
            return None
        schema = resolver.schema(media[1].get("schema") or {})
        return {"type": "object", **schema} if is_object(schema) else None
    return None
