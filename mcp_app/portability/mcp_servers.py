"""Import the `mcpServers` file clients write (Claude Desktop, VS Code) as a tenant's upstreams (AMB-170).

Claude Desktop (and Cursor, Cline) write `{"mcpServers": {"<name>": {"url", "headers"} | {"command", "args"}}}`;
VS Code writes `{"servers": {"<name>": {"type": "http", "url", "headers"}}}` in .vscode/mcp.json, or the
same under `"mcp"` in its settings. Each URL entry becomes an `Upstream` named after its key (lowercased,
other characters as '-'), prefix that name + '_' unless the entry gives `prefix`, its headers the
encrypted secret headers. An entry that runs a command (stdio) is skipped with the reason: this platform
never runs commands. So is one whose header names a variable only the client resolves (`${input:...}`,
`${env:...}`). An entry of type "sse" is an upstream on the 2024-11-05 HTTP+SSE transport. An upstream of that name already in the tenant is
kept as it is (its secrets too), so a second import changes nothing. Everything is checked (each row's
`full_clean`) before anything is saved; a problem anywhere raises DocumentError and nothing changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from mcp_app.handlers.secrets import check_secret_headers, encrypt_secrets
from mcp_app.models import Upstream, UpstreamTransport
from mcp_app.portability.document import DocumentError, path_of
from tenants.models import Tenant

CHANGE_REASON = "imported from an mcpServers file"
# The transports a client's entry may name that are Streamable HTTP (absent: a `url` entry is HTTP).
HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})
STDIO = "runs a local command ({command}): this platform never runs commands, only HTTP servers (a url) are imported"
VARIABLE = "header {header!r} refers to {value}, which only the client resolves: put the value in the file"
_NOT_NAME = re.compile(r"[^a-z0-9_-]+")
_VARIABLE = re.compile(r"\$\{[^}]*\}")


@dataclass
class ServersPlan:
    """What importing an mcpServers file does: upstreams to create, kept, and entries skipped with why."""

    tenant: Tenant
    create: list[Upstream] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    # The header values of each upstream to create (by name), encrypted only when saved.
    headers: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return bool(self.create)

    def lines(self) -> list[str]:
        """The plan for people: '+' created, '=' kept, '!' skipped with the reason."""
        out = []
        for row in self.create:
            secrets = ", ".join(sorted(self.headers.get(row.name, {}))) or "none"
            out.append(
                f"+ upstreams {row.name} ({row.url}, prefix {row.prefix!r}, secret headers: {secrets})"
            )
        out += [f"= upstreams {name} (already in the tenant: kept as it is)" for name in self.kept]
        out += [f"! skipped {key}: {why}" for key, why in self.skipped.items()]
        if self.create:
            out.append(
                "Sync them (admin's Sync now, the API's sync or manage.py sync_upstreams) to see their tools."
            )
        return out


def servers_of(document: Any) -> tuple[str, dict[str, Any]] | None:
    """The servers object of an mcpServers file and its key path, or None when `document` is no such file."""
    if not isinstance(document, dict) or "format" in document:
        return None
    for key in ("mcpServers", "servers"):
        if key in document:
            return key, document[key]
    inner = document.get("mcp")
    if isinstance(inner, dict) and "servers" in inner:
        return "mcp.servers", inner["servers"]
    return None


def upstream_name(key: str) -> str:
    """A client's server name as an upstream name: lowercase, other characters '-', at most 63."""
    return _NOT_NAME.sub("-", key.lower()).strip("-_")[:63]


def plan(tenant: Tenant, document: Any) -> ServersPlan:
    """Check every entry and say what would be created, kept or skipped (DocumentError on a problem)."""
    found = servers_of(document)
    if found is None:
        raise DocumentError(
            [("(document)", "This is not an mcpServers file: no mcpServers or servers object.")]
        )
    where, servers = found
    if not isinstance(servers, dict):
        raise DocumentError([(where, "Must be an object of server name → its settings.")])
    result = ServersPlan(tenant)
    problems: list[tuple[str, str]] = []
    existing = set(Upstream.objects.filter(tenant=tenant).values_list("name", flat=True))
    seen: dict[str, str] = {}
    for key, entry in servers.items():
        path = path_of([*where.split("."), key])
        if not isinstance(entry, dict):
            problems.append((path, "Must be an object (url and headers, or command and args)."))
            continue
        kind = entry.get("type")
        if "command" in entry or kind == "stdio":
            command = " ".join(str(p) for p in [entry.get("command", ""), *(entry.get("args") or [])][:4])
            result.skipped[key] = STDIO.format(command=f"`{command.strip()}`" if command.strip() else "stdio")
            continue
        if kind is not None and kind != "sse" and kind not in HTTP_TYPES:
            result.skipped[key] = (
                f"its type {kind!r} is not a transport this platform speaks (Streamable HTTP, HTTP+SSE)"
            )
            continue
        headers = entry.get("headers") or {}
        try:
            headers = check_secret_headers(headers)
        except ValidationError as exc:
            problems.append((path_of([*where.split("."), key, "headers"]), " ".join(exc.messages)))
            continue
        variable = next(((h, m.group()) for h, v in headers.items() if (m := _VARIABLE.search(v))), None)
        if variable is not None:
            result.skipped[key] = VARIABLE.format(header=variable[0], value=variable[1])
            continue
        name = upstream_name(key)
        if name in seen:
            problems.append((path, f"Its upstream name {name!r} is also {seen[name]!r}'s: rename one."))
            continue
        seen[name] = key
        if name in existing:
            result.kept.append(name)
            continue
        row = Upstream(
            tenant=tenant,
            name=name,
            url=entry.get("url") or "",
            transport=UpstreamTransport.SSE if kind == "sse" else UpstreamTransport.STREAMABLE_HTTP,
            prefix=entry.get("prefix", f"{name}_"),
            enabled=not entry.get("disabled", False),
        )
        try:
            row.full_clean()
        except ValidationError as exc:
            for field_name, messages in exc.message_dict.items():
                at = path if field_name == "__all__" else path_of([*where.split("."), key, field_name])
                problems.append((at, " ".join(messages)))
            continue
        result.create.append(row)
        if headers:
            result.headers[name] = headers
    if problems:
        raise DocumentError(problems)
    return result


def apply(servers_plan: ServersPlan) -> None:
    """Create the planned upstreams in one transaction, their headers encrypted."""
    with transaction.atomic():
        for row in servers_plan.create:
            headers = servers_plan.headers.get(row.name)
            row.secret_headers = encrypt_secrets(headers) if headers else ""
            vars(row)["_change_reason"] = CHANGE_REASON  # django-simple-history reads it
            row.save()
