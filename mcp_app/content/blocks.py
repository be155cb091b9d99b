"""Turn content specs stored on definitions into MCP content blocks.

Spec shapes (each may carry ``annotations`` {audience, priority, lastModified} and ``_meta``):

- ``{"type": "text", "text": "<Django template>"}`` → text block rendered with the variables;
- ``{"type": "image"|"audio", "data": "<base64>", "mimeType": ...}`` or
  ``{"type": "image"|"audio", "resource": "<uri of a tenant blob resource>"}``;
- ``{"type": "resource_link", "uri": ...}`` → name/title/description/mimeType/size from the tenant's
  resource, or given explicitly in the spec (then the uri need not be a tenant resource);
- ``{"type": "resource", "uri": ...}`` → the tenant resource embedded (text or blob).

Templates run in a sandboxed engine: no loaders (nothing reads files), only the default tags and
filters minus those that reach outside the template (``include``, ``extends``, ``load``, ``ssi``,
``debug``, ...); autoescape is off because the output is not HTML. Arguments are only ever context
data, so template syntax inside an argument value stays literal text.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from django.template import Context, Engine, Library, TemplateSyntaxError, Variable, VariableDoesNotExist
from django.template.base import Lexer, TokenType

from mcp_app.content import fields
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ContentError
from mcp_app.core.types import ResourceDef

# Largest text one template may render; more is an error, not a truncation.
MAX_RENDERED_CHARS = 1024 * 1024
# Widest padding or format width a filter may produce (ljust:10**9 would exhaust memory).
MAX_FILTER_WIDTH = 10_000
MAX_TEMPLATE_CHARS = 100_000

FORBIDDEN_TAGS = frozenset(
    {
        "include",
        "extends",
        "block",
        "load",
        "ssi",
        "debug",
        "csrf_token",
        "url",
        "lorem",
        "static",
        "get_static_prefix",
        "get_media_prefix",
    }
)
_WIDTH_FILTERS = ("center", "ljust", "rjust")
_ANNOTATION_KEYS = ("audience", "priority", "lastModified")
_MEDIA_TYPES = ("image", "audio")
BLOCK_TYPES = ("text", "image", "audio", "resource_link", "resource")


def _capped_width(name: str, original: Any) -> Any:
    def wrapped(value: Any, arg: Any) -> Any:
        try:
            width = int(arg)
        except (TypeError, ValueError):
            width = 0
        if width > MAX_FILTER_WIDTH:
            raise ContentError(f"The {name} filter width may be at most {MAX_FILTER_WIDTH}.")
        return original(value, arg)

    wrapped.is_safe = getattr(original, "is_safe", False)  # type: ignore[attr-defined]
    return wrapped


def _json_filter(value: Any) -> str:
    """Serialise a value as JSON (handy in JSON-producing templates)."""
    return json.dumps(value, ensure_ascii=False, default=str)


class SandboxEngine(Engine):
    """A template engine that cannot read files, load libraries or dump its context."""

    # loader_tags (include/extends/block) is left out entirely.
    default_builtins = ["django.template.defaulttags", "django.template.defaultfilters"]

    def __init__(self) -> None:
        super().__init__(dirs=[], app_dirs=False, loaders=[], libraries={}, autoescape=False, debug=False)
        library = Library()
        for builtin in self.template_builtins:
            for name, tag in builtin.tags.items():
                if name not in FORBIDDEN_TAGS:
                    library.tags[name] = tag
            for name, filt in builtin.filters.items():
                library.filters[name] = _capped_width(name, filt) if name in _WIDTH_FILTERS else filt
        library.filters["stringformat"] = _safe_stringformat(library.filters["stringformat"])
        library.filters["json"] = _json_filter
        self.template_builtins = [library]


def _safe_stringformat(original: Any) -> Any:
    def wrapped(value: Any, arg: Any) -> Any:
        widths = [int(n) for n in re.findall(r"\d+", str(arg))]
        if any(n > MAX_FILTER_WIDTH for n in widths):
            raise ContentError(f"The stringformat width may be at most {MAX_FILTER_WIDTH}.")
        return original(value, arg)

    return wrapped


_engine: SandboxEngine | None = None


def engine() -> SandboxEngine:
    """Return the shared sandboxed engine."""
    global _engine
    if _engine is None:
        _engine = SandboxEngine()
    return _engine


def _check_tags(source: str) -> None:
    for token in Lexer(source).tokenize():
        if token.token_type is TokenType.BLOCK:
            parts = token.split_contents()
            if parts and parts[0] in FORBIDDEN_TAGS:
                raise ContentError(
                    f"The template tag {{% {parts[0]} %}} is not allowed (line {token.lineno})."
                )


@functools.lru_cache(maxsize=1024)
def compile_template(source: str) -> Any:
    """Compile ``source`` in the sandbox; ContentError on forbidden tags or syntax errors."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise ContentError(f"The template is longer than {MAX_TEMPLATE_CHARS} characters.")
    _check_tags(source)
    try:
        return engine().from_string(source)
    except TemplateSyntaxError as exc:
        raise ContentError(f"Template syntax error: {exc}") from None


def validate_template(source: Any, where: str = "template") -> None:
    """Raise ContentError when ``source`` is not a usable template (for admin validation)."""
    if not isinstance(source, str):
        raise ContentError(f"The {where} must be a string.")
    compile_template(source)


def render_text(source: str, variables: dict[str, Any]) -> str:
    """Render a template string with ``variables`` as plain data; ContentError on any template fault."""
    if "{" not in source:
        return source  # nothing to render; skip the engine for literal text
    template = compile_template(source)
    try:
        text = template.render(Context(dict(variables), autoescape=False))
    except ContentError:
        raise
    except (TemplateSyntaxError, VariableDoesNotExist, ValueError, TypeError, ArithmeticError) as exc:
        raise ContentError(f"Template error: {exc}") from None
    if len(text) > MAX_RENDERED_CHARS:
        raise ContentError(f"The rendered text is longer than {MAX_RENDERED_CHARS} characters.")
    return text


_BARE_VARIABLE = re.compile(r"^\{\{\s*([A-Za-z0-9_][A-Za-z0-9_.]*)\s*\}\}$")


def render_value(value: Any, variables: dict[str, Any]) -> Any:
    """Render string templates inside a JSON value; ``"{{ name }}"`` alone keeps the variable's JSON type."""
    if isinstance(value, str):
        match = _BARE_VARIABLE.match(value.strip())
        if match:
            try:
                resolved = Variable(match.group(1)).resolve(variables)
            except VariableDoesNotExist:
                return None
            except TemplateSyntaxError:
                resolved = ...  # e.g. a leading underscore: let render_text report it
            if resolved is None or isinstance(resolved, (str, int, float, bool, list, dict)):
                return resolved
        return render_text(value, variables)
    if isinstance(value, dict):
        return {k: render_value(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, variables) for v in value]
    return value


def _annotations(spec: dict[str, Any], fallback: dict[str, Any] | None = None) -> dict[str, Any] | None:
    given = spec.get("annotations")
    if given is None:
        given = fallback or {}
    if not isinstance(given, dict):
        raise ContentError("Content annotations must be an object.")
    picked = {k: given[k] for k in _ANNOTATION_KEYS if k in given}
    return picked or None


def _finish(
    block: dict[str, Any], spec: dict[str, Any], fallback: dict[str, Any] | None = None
) -> dict[str, Any]:
    annotations = _annotations(spec, fallback)
    if annotations:
        block["annotations"] = annotations
    if isinstance(spec.get("_meta"), dict):
        block["_meta"] = spec["_meta"]
    return block


def resource_contents(resource: ResourceDef, uri: str | None = None) -> dict[str, Any]:
    """Return the ResourceContents dict of a tenant resource (text or base64 blob)."""
    contents: dict[str, Any] = {"uri": uri or resource.uri}
    if resource.mime_type:
        contents["mimeType"] = resource.mime_type
    if resource.blob is not None:
        contents["blob"] = base64.b64encode(resource.blob).decode("ascii")
    else:
        contents["text"] = resource.text
    return contents


def _lookup(resources: Mapping[str, ResourceDef], uri: Any) -> ResourceDef:
    if not isinstance(uri, str) or not uri:
        raise ContentError("A content block that refers to a resource needs its uri.")
    try:
        return resources[uri]
    except KeyError:
        raise ContentError(f"Unknown resource {uri!r}.") from None


def _media_block(spec: dict[str, Any], kind: str, resources: Mapping[str, ResourceDef]) -> dict[str, Any]:
    if "resource" in spec:
        resource = _lookup(resources, spec["resource"])
        if resource.blob is None:
            raise ContentError(f"Resource {resource.uri!r} has no binary content for an {kind} block.")
        data = base64.b64encode(resource.blob).decode("ascii")
        mime = spec.get("mimeType") or resource.mime_type
    else:
        data, mime = spec.get("data"), spec.get("mimeType")
        if not isinstance(data, str) or not data:
            raise ContentError(f"An {kind} block needs base64 'data' or a 'resource' uri.")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ContentError(f"The {kind} block's data is not valid base64.") from None
    if not isinstance(mime, str) or not mime:
        raise ContentError(f"An {kind} block needs a mimeType.")
    return _finish({"type": kind, "data": data, "mimeType": mime}, spec)


def _link_block(
    spec: dict[str, Any], variables: dict[str, Any], resources: Mapping[str, ResourceDef]
) -> dict[str, Any]:
    uri = render_text(spec["uri"], variables) if isinstance(spec.get("uri"), str) else spec.get("uri")
    resource = resources.get(uri) if isinstance(uri, str) else None
    if resource is None and not spec.get("name"):
        # Unknown URI and nothing to describe it with: almost surely a typo in the definition.
        _lookup(resources, uri)
    block: dict[str, Any] = {"type": "resource_link", "uri": uri}
    block["name"] = spec.get("name") or resource.name
    for key, attr in (("title", "title"), ("description", "description"), ("mimeType", "mime_type")):
        value = spec.get(key) or (getattr(resource, attr) if resource else "")
        if value:
            block[key] = value
    if "size" in spec:
        block["size"] = spec["size"]
    elif resource is not None:
        block["size"] = resource.size
    return _finish(block, spec, resource.annotations if resource else None)


def _render_one(spec: Any, variables: dict[str, Any], resources: Mapping[str, ResourceDef]) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ContentError("Each content entry must be an object with a 'type'.")
    kind = spec.get("type")
    if kind == "text":
        source = spec.get("text")
        if not isinstance(source, str):
            raise ContentError("A text block needs a 'text' string.")
        return _finish({"type": "text", "text": render_text(source, variables)}, spec)
    if kind in _MEDIA_TYPES:
        return _media_block(spec, kind, resources)
    if kind == "resource_link":
        return _link_block(spec, variables, resources)
    if kind == "resource":
        uri = render_text(spec["uri"], variables) if isinstance(spec.get("uri"), str) else spec.get("uri")
        resource = _lookup(resources, uri)
        return _finish({"type": "resource", "resource": resource_contents(resource)}, spec)
    raise ContentError(f"Unknown content type {kind!r}; use one of: {', '.join(BLOCK_TYPES)}.")


def _needs_resources(specs: list[Any]) -> bool:
    return any(
        isinstance(s, dict) and (s.get("type") in ("resource_link", "resource") or "resource" in s)
        for s in specs
    )


async def render_blocks(ctx: RequestContext, specs: list[dict], variables: dict) -> list[dict]:
    """Return MCP content blocks for ``specs`` rendered with ``variables``; ContentError on bad specs."""
    if not isinstance(specs, list):
        raise ContentError("The content must be a list of content blocks.")
    resources = await ctx.resources() if _needs_resources(specs) else {}
    return [_render_one(spec, variables, resources) for spec in specs]


def _validate_uri(value: Any, where: str) -> None:
    """A URI in a spec: absolute, or a template over the arguments (then it must compile)."""
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        try:
            validate_template(value, f"uri of {where}")
        except ContentError as exc:
            fields.fail(f"{where}: {exc.message}")
        return
    fields.validate_resource_uri(value)


def validate_spec(spec: Any, where: str = "Content") -> None:
    """Check one content spec (the shapes rendered above); ValidationError says what to fix.

    The one validator of content specs, for tool content and prompt messages alike. A resource or
    resource_link `uri` may be a template over the arguments (`{{ resourceUri }}`); it is checked
    to compile, and its value once rendered is looked up when the tool or prompt runs.
    """
    if not isinstance(spec, dict):
        fields.fail(f"{where} must be an object with a 'type'.")
    kind = spec.get("type")
    if kind not in BLOCK_TYPES:
        fields.fail(f"{where}: unknown type {kind!r}; 'type' must be one of: {', '.join(BLOCK_TYPES)}.")
    if "annotations" in spec:
        fields.validate_annotations(spec["annotations"])
    if "_meta" in spec:
        fields.validate_meta(spec["_meta"])
    if kind == "text":
        try:
            validate_template(spec.get("text"), f"text of {where.lower()}")
        except ContentError as exc:
            fields.fail(f"{where}: {exc.message}")
    elif kind in _MEDIA_TYPES:
        if "resource" in spec:
            # Taken from one of the tenant's (binary) resources when rendered.
            _validate_uri(spec["resource"], where)
        else:
            needs = f"{where}: an {kind} block needs 'data' and 'mimeType', or a 'resource' uri."
            if "data" not in spec:
                fields.fail(needs)
            fields.validate_base64(spec["data"], where)
            if not isinstance(spec.get("mimeType"), str) or not fields.MIME.match(spec["mimeType"]):
                fields.fail(needs)
    else:
        # resource (embeds the tenant resource) and resource_link (points at any URI).
        _validate_uri(spec.get("uri"), where)
        for key in ("name", "title", "description", "mimeType"):
            if key in spec and not isinstance(spec[key], str):
                fields.fail(f"{where}: '{key}' must be a string.")


def validate_specs(specs: Any) -> None:
    """Check a list of content specs (a template tool's `content`)."""
    if not isinstance(specs, list):
        fields.fail("'content' must be a list of content blocks.")
    for i, spec in enumerate(specs, start=1):
        validate_spec(spec, f"Content block {i}")
