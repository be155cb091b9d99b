"""The admin's "Try this tool": one `tools/call` through the protocol core, made as a client makes it.

The same path a client's call takes after the transport (argument validation, the handler or a
background worker, result checks, shaping for the newest revision), so what an editor sees here is
what a client gets. Notifications the call emits (progress, log messages) are shown beside it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from mcp_app import catalog
from mcp_app.core.context import RequestContext, SessionState
from mcp_app.core.versions import LATEST, LATEST_MODERN
from mcp_app.protocol.dispatch import dispatch

# The admin request waits at most this long; a longer call is cancelled (a worker stops it too).
TRY_SECONDS = 60.0
REQUEST_ID = "admin-try"


class TryError(Exception):
    """Why the tool could not be tried; the message is shown on the page."""


@dataclass
class Outcome:
    body: str
    elapsed_ms: int
    is_error: bool = False
    protocol_error: bool = False
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def notifications_text(self) -> str:
        return "\n".join(json.dumps(n, ensure_ascii=False) for n in self.notifications)


_PLACEHOLDERS = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments to start from: each property's default, and a blank value for required ones without."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    example: dict[str, Any] = {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        if "default" in spec:
            example[name] = spec["default"]
        elif name in required:
            kind = spec.get("type")
            example[name] = _PLACEHOLDERS.get(kind if isinstance(kind, str) else "string", "")
    return example


def parse_arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        raise TryError(f"The arguments are not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise TryError('The arguments must be a JSON object, like {"message": "hello"}.')
    return value


async def run(tenant_slug: str, tool_name: str, user_id: int, arguments: dict[str, Any]) -> Outcome:
    """Call the tool as a client of its tenant would, and report the answer."""
    tenant = await catalog.get_tenant(tenant_slug)
    if tenant is None:
        raise TryError("The tenant is inactive: its endpoint serves nothing, so there is nothing to try.")
    tool = (await catalog.get_catalog(tenant.id)).tools_by_name.get(tool_name)
    if tool is None:
        raise TryError("The tool is disabled: clients cannot call it. Enable it and save first.")
    # As the newest client able to see it: a tool only 2026-07-28 can describe is tried as one.
    version = LATEST if tool.legacy else LATEST_MODERN
    notifications: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        notifications.append(message)

    session = SessionState(
        id=f"admin-try-{user_id}",
        tenant_id=tenant.id,
        protocol_version=version,
        log_level="debug",
        initialized=True,
        user_id=user_id,
    )
    ctx = RequestContext(
        tenant=tenant,
        protocol_version=version,
        session=session,
        log_level="debug",  # every log message, in either era
        user_id=user_id,
        request_id=REQUEST_ID,
        progress_token=REQUEST_ID,
        emit=emit,
        cancelled=asyncio.Event(),
    )
    message = {
        "jsonrpc": "2.0",
        "id": REQUEST_ID,
        "method": "tools/call",
        "params": {"name": tool_name, "arguments": arguments, "_meta": {"progressToken": REQUEST_ID}},
    }
    started = time.monotonic()
    try:
        async with asyncio.timeout(TRY_SECONDS):
            response = await dispatch(ctx, message)
    except TimeoutError:
        raise TryError(
            f"The tool did not answer within {TRY_SECONDS:g} s, the most the admin waits."
        ) from None
    elapsed_ms = round((time.monotonic() - started) * 1000)
    assert response is not None
    if "error" in response:
        body = json.dumps(response["error"], indent=2, ensure_ascii=False)
        return Outcome(body, elapsed_ms, protocol_error=True, notifications=notifications)
    result = response["result"]
    body = json.dumps(result, indent=2, ensure_ascii=False)
    return Outcome(body, elapsed_ms, is_error=bool(result.get("isError")), notifications=notifications)
