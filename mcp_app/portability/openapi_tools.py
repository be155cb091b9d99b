"""Turn chosen operations of an OpenAPI description into a tenant's ``http`` tools (AMB-57).

The server URL, the auth header (stored encrypted as the tool's secret header, never in the config)
and the timeout are chosen once for all the operations. A tool of the same name is updated (only the
fields an operation describes; its approval, scope, enabled flag and other secrets stay), a new one
created. Every tool is checked with the model's own ``full_clean`` first, and all are saved in one
transaction, or none. A document given by URL is fetched through the http kind's one way out
(``handlers/http.send``: the SSRF guard, the pinned address, no redirects, the size cap).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import transaction

from mcp_app.core import ssrf
from mcp_app.core.errors import ToolError
from mcp_app.handlers import http
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets, encrypt_secrets
from mcp_app.models import Tool
from mcp_app.portability.document import DocumentError, loads, same
from mcp_app.portability.importer import CHANGE_REASON
from mcp_app.portability.limits import DocumentTooLarge, refuse_large
from mcp_app.portability.openapi import Description, OpenApiError, parse
from tenants.models import Tenant

FETCH_TIMEOUT = 20.0
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# The fields an operation describes; the others are the tenant's own choices and stay.
OWNED_FIELDS = (
    "title", "description", "input_schema", "output_schema", "annotations", "handler", "handler_config",
    "timeout_seconds",
)  # fmt: skip


@dataclass
class Settings:
    """What is set once for every imported operation."""

    base_url: str
    timeout: float = 30.0
    auth_header: str = ""
    auth_value: str = ""


@dataclass
class Outcome:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged}


def fetch(url: str) -> tuple[bytes, str]:
    """The document at ``url`` (and the URL, to resolve relative server URLs); OpenApiError if it cannot be read."""
    try:
        reply = async_to_sync(http.send)(None, None, "GET", url, FETCH_TIMEOUT)
    except ToolError as exc:
        raise OpenApiError(f"The document could not be fetched: {exc.message}") from None
    if not 200 <= reply.status < 300:
        raise OpenApiError(
            f"The document could not be fetched: {http.status_message(reply.status, reply.reason)}"
        )
    try:
        refuse_large(len(reply.body))
    except DocumentTooLarge as exc:
        raise OpenApiError(exc.problems[0][1]) from None
    return reply.body, url


def read(raw: bytes | str, source_url: str = "") -> Description:
    """Parse YAML or JSON text as an OpenAPI description (OpenApiError naming the problem)."""
    try:
        document = loads(raw)
    except DocumentError as exc:
        raise OpenApiError(exc.problems[0][1]) from None
    return parse(document, source_url)


def _check_settings(settings: Settings) -> list[tuple[str, str]]:
    problems = []
    try:
        ssrf.split_url(settings.base_url)
    except ToolError as exc:
        problems.append(("base_url", exc.message))
    if isinstance(settings.timeout, bool) or not 0 < settings.timeout <= 300:
        problems.append(("timeout", "The timeout must be a number of seconds between 0 and 300."))
    if settings.auth_header and not _HEADER_NAME.match(settings.auth_header):
        problems.append(("auth_header", f"{settings.auth_header!r} is not a valid header name."))
    if settings.auth_value and not settings.auth_header:
        problems.append(("auth_header", "Name the header the value goes in (e.g. Authorization)."))
    if any(c in settings.auth_value for c in "\r\n\0"):
        problems.append(("auth_value", "The header value must not contain line breaks."))
    return problems


def _secrets(tool: Tool, settings: Settings) -> str:
    if not settings.auth_value:
        return tool.handler_secrets
    try:
        held = decrypt_secrets(tool.handler_secrets)
    except SecretsError:
        held = {}
    if held.get(settings.auth_header) == settings.auth_value:
        return tool.handler_secrets  # the same value: no new ciphertext, so a second import changes nothing
    held = {k: v for k, v in held.items() if k.lower() != settings.auth_header.lower()}
    return encrypt_secrets({**held, settings.auth_header: settings.auth_value})


def import_operations(
    tenant: Tenant, description: Description, keys: list[str], settings: Settings, user: Any = None
) -> Outcome:
    """Create or update one http tool per chosen operation key (``GET /pets``); DocumentError if any cannot be."""
    problems = _check_settings(settings)
    operations = description.by_key()
    chosen = []
    for key in keys:
        op = operations.get(key)
        if op is None:
            problems.append((key, "No such operation in the document."))
        elif not op.supported:
            problems.append((key, op.reason))
        else:
            chosen.append(op)
    if not chosen and not problems:
        problems.append(("operations", "Choose at least one operation."))
    if problems:
        raise DocumentError(problems)
    outcome = Outcome()
    with transaction.atomic():
        existing = {t.name: t for t in Tool.objects.select_for_update().filter(tenant=tenant)}
        pending = []
        for op in chosen:
            tool = existing.get(op.name) or Tool(tenant=tenant, name=op.name)
            before = {name: getattr(tool, name) for name in OWNED_FIELDS} if tool.pk else None
            values = {
                "title": op.title,
                "description": op.description,
                "input_schema": op.input_schema,
                "output_schema": op.output_schema,
                "annotations": op.annotations(),
                "handler": "http",
                "handler_config": op.handler_config(settings.base_url, settings.timeout),
                "timeout_seconds": max(1, math.ceil(settings.timeout)),
            }
            for name, value in values.items():
                setattr(tool, name, value)
            secrets = _secrets(tool, settings)
            try:
                tool.full_clean(exclude=["tenant"], validate_unique=False, validate_constraints=False)
            except ValidationError as exc:
                problems += [
                    (f"{op.key} ({op.name}).{name}", m) for name, ms in exc.message_dict.items() for m in ms
                ]
                continue
            unchanged = (
                before is not None
                and secrets == tool.handler_secrets
                and all(same(before[name], value) for name, value in values.items())
            )
            pending.append((op, tool, secrets, unchanged, before is None))
        if problems:
            raise DocumentError(problems)
        for op, tool, secrets, unchanged, created in pending:
            if unchanged:
                outcome.unchanged.append(op.name)
                continue
            tool.handler_secrets = secrets
            tool._change_reason = f"{CHANGE_REASON} (OpenAPI {op.key})"
            if user is not None and getattr(user, "is_authenticated", False):
                tool._history_user = user
            tool.save()
            (outcome.created if created else outcome.updated).append(op.name)
    return outcome
