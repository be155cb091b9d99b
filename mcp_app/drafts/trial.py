"""Trying a definition before clients get it: one `tools/call` of a tool's draft (or its published
version), through the protocol core as a client's call goes (AMB-221, AMB-223).

The policy simulator's "with the drafts" (`with_rule_drafts`, AMB-362) decides with the tenant's
policies, guardrails and quotas as their drafts would be published.

The admin's Try page (admin/try_tool.py: live, answering the tool's questions) and the API's
`POST .../tools/<id>/try/` (a pipeline that stages, tries, then publishes) share this: which definition
is tried (`definition_for`), the request context that hands it to the dispatch (`RequestContext.draft_tool`),
and a plain call that declares no client capability (a tool that asks the client gets the plain-words
refusal any such client gets). Nothing here reads a request: who may try is the caller's business.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import zlib
from typing import Any

from channels.db import database_sync_to_async

from mcp_app import catalog
from mcp_app.core import ui_apps
from mcp_app.core.context import Emit, RequestContext, SessionState
from mcp_app.core.types import Catalog, TenantInfo, ToolDef
from mcp_app.core.versions import LATEST, LATEST_MODERN, SUPPORTED_VERSIONS, is_modern
from mcp_app.drafts import service as drafts
from mcp_app.models import Guardrail, Policy, Quota, Tool
from mcp_app.protocol.dispatch import dispatch
from mcp_app.protocol.simulate import SimulatedCaller, Simulation, simulate
from mcp_app.protocol.tasks import FORBIDDEN
from tenants import wall

REQUEST_ID = "admin-try"
# The revisions a trial may speak: the current one and every legacy one.
ERAS: tuple[str, ...] = (LATEST_MODERN, *SUPPORTED_VERSIONS)

class TrialError(Exception):
    """Why the tool could not be tried, in words for the person (or pipeline) that asked."""


async def definition_for(tool_row: Tool) -> tuple[TenantInfo, ToolDef]:
    """The tenant and the definition of `tool_row` that is tried: its draft when it has one, else the
    one its clients are served.

    `tool_row` comes with its draft applied (drafts.apply_draft) and its tenant loaded; nothing is read
    again. A draft of a background tool runs inline: workers run published versions only. An upstream
    tool's draft is tried as published (its upstream's connection is resolved by the catalog alone).
    """
    tenant = await catalog.get_tenant(tool_row.tenant.slug)
    if tenant is None:
        raise TrialError("The tenant is inactive: its endpoint serves nothing, so there is nothing to try.")
    if drafts.has_draft(tool_row) and tool_row.handler != "upstream":
        if not tool_row.enabled:
            raise TrialError("The draft disables the tool: clients could not call it. Enable it to try the draft.")
        draft = tool_row.to_def()
        return tenant, dataclasses.replace(draft, execution="inline") if draft.execution != "inline" else draft
    tool = (await catalog.get_catalog(tenant.id)).tools_by_name.get(tool_row.name)
    if tool is None:
        raise TrialError("The tool is disabled: clients cannot call it. Enable it and save first.")
    return tenant, tool


def default_era(tool: ToolDef) -> str:
    """The revision a trial speaks unless told: the newest a client seeing the tool would (a tool only
    2026-07-28 can describe is tried as one of its clients)."""
    return LATEST if tool.legacy else LATEST_MODERN


def visible(tool: ToolDef, version: str) -> None:
    if not (tool.legacy or is_modern(version)):
        raise TrialError(
            f"A client on {version} does not see this tool: its output schema is not an object, which only "
            f"2026-07-28 can describe. Choose {LATEST_MODERN} to try it."
        )


def call_context(
    tenant: TenantInfo, version: str, user_id: int, session: str, tool: ToolDef, arguments: dict[str, Any],
    emit: Emit, capabilities: dict[str, Any] | None = None,
) -> tuple[RequestContext, dict[str, Any]]:  # fmt: skip
    """The request context and `tools/call` message of one trial, `tool` riding in the context."""
    # A trial plays a host with MCP Apps: a tool only its app calls is tried as the app calls it (AMB-273).
    capabilities = ui_apps.with_support(capabilities)
    state = SessionState(
        id=session,
        tenant_id=tenant.id,
        protocol_version=version,
        client_capabilities=capabilities or {},
        log_level="debug",
        initialized=True,
        user_id=user_id,
    )
    ctx = RequestContext(
        tenant=tenant,
        protocol_version=version,
        session=state,
        client_capabilities=capabilities or {},
        log_level="debug",  # every log message, in either era
        user_id=user_id,
        request_id=REQUEST_ID,
        progress_token=REQUEST_ID,
        emit=emit,
        cancelled=asyncio.Event(),
        draft_tool=tool,  # what definition_for chose: the draft, or the published one itself
    )
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": REQUEST_ID,
        "method": "tools/call",
        "params": {"name": tool.name, "arguments": arguments, "_meta": {"progressToken": REQUEST_ID}},
    }
    if "tasks" in (capabilities or {}) and tool.task_support != FORBIDDEN:
        # A 2025-11-25 client with tasks calls a tool that supports them as a task.
        message["params"]["task"] = {}
    return ctx, message


@dataclasses.dataclass
class Answer:
    """One trial's answer: the JSON-RPC response, how long it took, what the call emitted meanwhile."""

    response: dict[str, Any]
    elapsed_ms: int
    notifications: list[dict[str, Any]]
    version: str


async def call_once(
    tool_row: Tool, user_id: int, session: str, arguments: dict[str, Any], era: str = "", seconds: float = 60.0
) -> Answer:
    """One call as a client that declares nothing (nobody is there to answer a question)."""
    tenant, tool = await definition_for(tool_row)
    version = era or default_era(tool)
    visible(tool, version)
    notifications: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        notifications.append(message)

    ctx, message = call_context(tenant, version, user_id, session, tool, arguments, emit)
    started = time.monotonic()
    try:
        async with asyncio.timeout(seconds):
            response = await dispatch(ctx, message)
    except TimeoutError:
        raise TrialError(f"The tool did not answer within {seconds:g} s, the most a trial waits.") from None
    assert response is not None  # a request (it has an id) always gets a response
    return Answer(response, round((time.monotonic() - started) * 1000), notifications, version)


# The catalog's fields the governance rules fill, and their rows.
RULES: tuple[tuple[str, type[Policy | Guardrail | Quota]], ...] = (
    ("policies", Policy),
    ("guardrails", Guardrail),
    ("quotas", Quota),
)


def _rules_as_drafted(tenant_id: int) -> dict[str, tuple[Any, ...]]:
    """The tenant's enabled rules as they would be once every draft is published (a never-published
    one included), each kind sorted by name as the catalog holds it."""
    found: dict[str, tuple[Any, ...]] = {}
    with wall.tenant(tenant_id):
        for name, model in RULES:
            rows = [drafts.apply_draft(row) for row in model.objects.for_tenant(tenant_id)]
            found[name] = tuple(row.to_def() for row in sorted(rows, key=lambda r: r.name) if row.enabled)
    return found


async def with_rule_drafts(tenant_id: int) -> Catalog:
    """The tenant's catalog with its governance rules' drafts in place of the published rules: what
    the simulator decides with when asked to (nothing is published, nothing else changes)."""
    published = await catalog.get_catalog(tenant_id)
    rules = await database_sync_to_async(_rules_as_drafted)(tenant_id)
    if all(getattr(published, name) == defs for name, defs in rules.items()):
        return published
    # A version of its own, negative so never a published one's: the decision's and the guardrails'
    # caches are keyed by version, and keep what the drafts decide apart from what clients get.
    version = -1 - zlib.crc32(repr(sorted(rules.items())).encode())
    return dataclasses.replace(
        published, version=version, policies=rules["policies"], guardrails=rules["guardrails"], quotas=rules["quotas"]
    )


async def simulated(
    tenant: TenantInfo,
    caller: SimulatedCaller,
    kind: str,
    name: str,
    arguments: dict[str, Any],
    sample: str = "",
    *,
    with_drafts: bool = False,
) -> Simulation:
    """The simulator (protocol/simulate.py) with the rules clients get or, `with_drafts`, with their drafts."""
    rules = await with_rule_drafts(tenant.id) if with_drafts else None
    return await simulate(tenant, caller, kind, name, arguments, sample, rules)
