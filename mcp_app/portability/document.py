"""The tenant document: which fields of which rows it holds, how it is written, read and checked.

One document (YAML or JSON) holds a tenant's settings and every tool, prompt, resource and resource
template, each keyed by its natural key (name, URI, URI template). A field equal to the model's
default is left out (a short document reviews well in git) and a field left out means the default,
so export → import is exact. Secrets are named, never given (AMB-56). The published JSON Schema is
``tenant-document.schema.json`` beside this module; problems are reported with their document path,
``tools[2].input_schema.properties`` (0-based indexes).
"""

from __future__ import annotations

import base64
import enum
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from django.db import models
from jsonschema.exceptions import ValidationError as SchemaValidationError

from lib import nesting
from mcp_app.content import fields
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets
from mcp_app.models import Policy, Prompt, Provider, Quota, Resource, ResourceTemplate, Tool, Upstream
from mcp_app.models.guardrails import Guardrail
from mcp_app.models.upstreams import UPSTREAM_SETTINGS
from tenants.models import Tenant

FORMAT = "mcp-platform/tenant"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("tenant-document.schema.json")


@dataclass(frozen=True)
class Kind:
    """One list of the document: its key, the model, its natural key and the fields it carries."""

    key: str
    model: type[models.Model]
    natural_key: str
    fields: tuple[str, ...]


_COMMON = ("title", "description", "enabled")
# How a document names a provider's client secret (its value is never in a document).
PROVIDER_SECRET = "client_secret"
KINDS: tuple[Kind, ...] = (
    # Before the tools that name them (AMB-164): an upstream's published tools are entries of `tools`.
    Kind("upstreams", Upstream, "name", UPSTREAM_SETTINGS),
    # Connected accounts' providers (AMB-207): the client secret by name only, the connections never.
    Kind(
        "providers",
        Provider,
        "name",
        (
            "name",
            "display_name",
            "discovery_url",
            "authorize_url",
            "token_url",
            "revocation_url",
            "client_id",
            "scopes",
            "resource",
        ),  # fmt: skip
    ),
    Kind(
        "tools",
        Tool,
        "name",
        (
            "name",
            *_COMMON,
            "input_schema",
            "output_schema",
            "annotations",
            "handler",
            "handler_config",
            "timeout_seconds",
            "execution",
            "worker_wait_seconds",
            "task_support",
            "required_scope",
            "approval",
            "approval_without_elicitation",
            "result_cache_seconds",
            "result_cache_shared",
            "icons",
            "meta",
        ),
    ),  # fmt: skip
    Kind("prompts", Prompt, "name", ("name", *_COMMON, "arguments", "messages", "icons", "meta")),
    Kind(
        "resources",
        Resource,
        "uri",
        ("uri", "name", *_COMMON, "mime_type", "text", "blob", "annotations", "icons", "meta"),
    ),
    Kind(
        "resource_templates",
        ResourceTemplate,
        "uri_template",
        (
            "uri_template",
            "name",
            *_COMMON,
            "mime_type",
            "handler",
            "handler_config",
            "completions",
            "annotations",
            "icons",
            "meta",
        ),
    ),  # fmt: skip
    # Last: a policy names targets the kinds above define (AMB-347).
    Kind("policies", Policy, "name", ("name", "description", "effect", "applies_to", "condition", "enabled")),
    # After the tools: a quota names one that exists (AMB-352).
    Kind("quotas", Quota, "name", ("name", "description", "tool", "calls", "window", "per", "enabled")),
    # After the tools too: a guardrail may guard one (AMB-354).
    Kind("guardrails", Guardrail, "name",
         ("name", "description", "detector", "pattern", "where", "action", "tool", "enabled")),  # fmt: skip
)
# Model fields a document never carries: identity, bookkeeping, and the encrypted secret values.
# An upstream's sync status is what its server said last, not a definition: a sync writes it again.
NOT_CARRIED = frozenset(
    {
        "id", "tenant", "updated_at", "handler_secrets", "secret_headers", "oauth_client_secret", "last_protocol_version",
        "client_secret", "created_at",
        "last_server_info", "last_capabilities", "last_synced_at", "last_error",
        # An upstream's prompts and resources as offered and pinned: the first sync after an import pins (AMB-194).
        "offered_extras", "pinned_extras",
        # A definition's published version number and its pending draft (AMB-218): the document is
        # what clients get; an import makes its own versions (or drafts, with --draft).
        "version", "draft",
        # A tool's upstream: named inside its handler_config, as documents always did (value_of, AMB-310).
        "upstream",
    }
)  # fmt: skip
SETTINGS_FIELDS = (
    "name", "title", "description", "server_version", "website_url", "icons", "instructions",
    "allowed_origins", "auth_mode", "cache_ttl_ms", "task_ttl_seconds", "cache_scope",
    "calls_per_minute", "calls_per_minute_per_tool", "calls_per_minute_per_caller",
    "max_sessions", "max_background_runs", "max_streams", "max_streams_per_session", "max_body_bytes",
    "stream_poll_seconds", "stream_poll_retry_ms", "audit_sampling",
    # Its own identity provider (AMB-203); the introspection client's secret is never carried.
    "identity",
    # Who single sign-on makes a member, and as what (tenants/sso_memberships.py, AMB-213).
    "sso_email_domains", "sso_groups", "sso_role",
    # Listed in the platform's MCP Registry (AMB-372).
    "registry_listed",
    # tools/list: every tool, or a search in their stead (AMB-376).
    "tool_discovery",
)  # fmt: skip


class DocumentError(Exception):
    """The document cannot be imported; ``problems`` lists each (path, message)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))
        self.problems = problems

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised in an owner's own process (content/forked.py) and re-raised in the serving one: pickle
        # rebuilds it from its problems, not from the joined message.
        return (type(self), (self.problems,))


# --- Paths --------------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")


def path_of(parts: Any) -> str:
    """``["tools", 2, "input_schema"]`` → ``tools[2].input_schema``; odd keys as ``["a b"]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "(document)"


# --- Reading and writing ------------------------------------------------------------------------


def loads(text: str | bytes) -> Any:
    """Parse a YAML or JSON document (JSON is YAML); DocumentError with the line on a syntax error."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise DocumentError([("(document)", "The document is not UTF-8 text.")]) from None
    try:
        return nesting.yaml_loads(text)
    except nesting.TooDeep as exc:
        raise DocumentError([("(document)", f"The document cannot be read: {exc}.")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML or JSON"
        raise DocumentError([("(document)", f"The document cannot be read{where}: {problem}.")]) from None


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (text resources and templates stay readable in a diff)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dumps(document: dict[str, Any], fmt: str = "yaml") -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


# --- Export -------------------------------------------------------------------------------------


def default_of(model: type[models.Model], field: str) -> Any:
    """The field's default as a document holds it: a choice as its plain value (AMB-118)."""
    default = cast(
        models.Field, model._meta.get_field(field)
    ).get_default()  # a column, not a relation's far end
    return default.value if isinstance(default, enum.Enum) else default


def to_document_value(field: str, value: Any) -> Any:
    if field == "blob":
        return None if value is None else base64.b64encode(bytes(value)).decode("ascii")
    return value


def secret_names(row: Tool | Upstream) -> list[str]:
    """Names of a tool's or an upstream's stored secret headers (unreadable secrets: none, the import says so)."""
    token = row.secret_headers if isinstance(row, Upstream) else row.handler_secrets
    try:
        return sorted(decrypt_secrets(token))
    except SecretsError:
        return []


def pinned_of(upstream: Upstream) -> dict[str, Any]:
    """The definitions its published tools are pinned to, by remote name (AMB-164)."""
    rows = upstream.remote_tools.filter(tool__isnull=False).order_by("remote_name")
    return {row.remote_name: row.pinned for row in rows if row.pinned is not None}


def value_of(obj: models.Model, field: str) -> Any:
    """A row's field as a document carries it: a tool's configuration names its upstream (AMB-310)."""
    if field == "handler_config" and isinstance(obj, Tool):
        return obj.wire_config()
    return getattr(obj, field)


def export_item(kind: Kind, obj: models.Model) -> dict[str, Any]:
    item: dict[str, Any] = {}
    for field in kind.fields:
        value = value_of(obj, field)
        if field != kind.natural_key and same(value, default_of(kind.model, field)):
            continue
        if field == "blob" and value is None:
            continue
        item[field] = to_document_value(field, value)
    if isinstance(obj, Tool | Upstream) and (names := secret_names(obj)):
        item["secrets"] = names
    if isinstance(obj, Provider) and obj.client_secret:
        item["secrets"] = [PROVIDER_SECRET]
    if isinstance(obj, Upstream) and (pins := pinned_of(obj)):
        item["pinned"] = pins
    return item


def export_tenant(tenant: Tenant) -> dict[str, Any]:
    """The tenant's whole definition set as a document (secrets by name only)."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "tenant": tenant.slug,
        "settings": {field: getattr(tenant, field) for field in SETTINGS_FIELDS},
    }
    for kind in KINDS:
        rows = kind.model._default_manager.filter(tenant=tenant).order_by(kind.natural_key)
        if kind.model is Tool:
            rows = rows.select_related("upstream")
        if hasattr(kind.model, "draft"):
            # What clients get: published versions; drafts stay behind (AMB-220).
            rows = rows.filter(version__gt=0)
        document[kind.key] = [export_item(kind, row) for row in rows]
    return document


# --- Comparing ----------------------------------------------------------------------------------


def canonical(value: Any) -> Any:
    """A value as compared: bytes for binary, a choice as its value, JSON text telling true from 1 and 1 from 1.0."""
    if isinstance(value, enum.Enum):  # a TextChoices member never equals its stored str by type
        return value.value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def same(a: Any, b: Any) -> bool:
    return type(canonical(a)) is type(canonical(b)) and canonical(a) == canonical(b)


# --- The JSON Schema ----------------------------------------------------------------------------


@functools.cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@functools.cache
def _validator() -> Any:
    # Resolves the definition fields' schema its items $ref, with the same keywords as the admin's.
    return fields.validator_of(schema())


# Per list, the item fields whose shape is a definition fields' entry: a problem inside one is told
# as the admin and the API tell it (content.fields.explain), at the field's path, like full_clean's.
DEFINITION_FIELDS = {
    "tools": {"annotations", "handler_config", "icons", "meta"},
    "prompts": {"arguments", "messages", "icons", "meta"},
    "resources": {"uri", "mime_type", "annotations", "icons", "meta"},
    "resource_templates": {"mime_type", "completions", "handler_config", "annotations", "icons", "meta"},
}


# A field's entry by its name, where one name is one entry (its title is the subject of a message).
FIELD_SCHEMAS = {
    "arguments": "prompt_arguments",
    "messages": "prompt_messages",
    "completions": "template_completions",
}
FIELD_SCHEMAS |= {name: name for name in ("icons", "meta", "uri", "mime_type")}


def in_definition_field(parts: list[Any]) -> bool:
    return len(parts) >= 3 and parts[2] in DEFINITION_FIELDS.get(str(parts[0]), ())


def schema_problems(document: Any) -> list[tuple[str, str]]:
    """Every place the document breaks the published JSON Schema, as (path, message)."""
    problems: list[tuple[str, str]] = []
    for error in sorted(_validator().iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        for problem in _explain(error):
            if problem not in problems:
                problems.append(problem)
    return problems


def _explain(error: SchemaValidationError) -> list[tuple[str, str]]:
    parts = list(error.absolute_path)
    if in_definition_field(parts):
        where = path_of(parts[:3])
        subject = (
            fields.schema()["$defs"].get(FIELD_SCHEMAS.get(str(parts[2]), ""), {}).get("title", "The value")
        )
        return [(where, m) for m in fields.explain(error, skip=3, root=str(parts[2]), subject=subject)]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {})) if isinstance(error.schema, Mapping) else set()
        return [
            (path_of([*parts, key]), f"Unknown key; allowed: {', '.join(sorted(allowed))}.")
            for key in sorted(set(error.instance) - allowed)
        ]
    if error.validator == "required" and isinstance(error.instance, dict):
        return [
            (path_of([*parts, key]), "Required.")
            for key in cast(Any, error.validator_value)
            if key not in error.instance
        ]
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return [
            (path_of(parts), f"Must be {' or '.join(map(_a, wanted))}, not {_a(_json_type(error.instance))}.")
        ]
    if error.validator == "const":
        return [(path_of(parts), f"Must be {json.dumps(error.validator_value)}.")]
    # Anything else (an input schema against its meta-schema, say) in words, an anyOf as its best branch.
    skip = max(len(parts) - 1, 0)
    return [(path_of(parts), message) for message in fields.explain(error, skip=skip, subject="It")]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _a(kind: str) -> str:
    return kind if kind == "null" else f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
