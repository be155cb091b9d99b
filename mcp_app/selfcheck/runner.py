"""Check a tenant as its clients meet it (AMB-240): its endpoint's lists in every revision, its tools'
static checks, and, on demand, what only the network can say.

The lists are the dispatcher's answers, asked as the connect page asks them (``connect.page.list_all``:
one legacy session per revision 2024-11-05..2025-11-25, one 2026-07-28 request), so a tool a revision
does not list is found where a client would miss it. With ``network`` (the admin's page, the API, the
command; never on save): each tool URL's host is resolved and vetted by the SSRF guard (nothing is
fetched), each tool safe to call is called once with arguments made from its schema (AMB-244), and each
enabled upstream server is asked what it offers within a short deadline (AMB-245).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from asgiref.sync import sync_to_async

from mcp_app import catalog, federation
from mcp_app.connect.page import LIST_METHODS, Listing, list_all
from mcp_app.core import ssrf, ui_apps
from mcp_app.core.context import RequestContext
from mcp_app.core.schema_examples import sample_arguments
from mcp_app.core.types import Catalog, TenantInfo, ToolDef
from mcp_app.core.versions import (
    ALL_VERSIONS,
    LATEST_MODERN,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    is_modern,
)
from mcp_app.models import Upstream
from mcp_app.protocol import schemas
from mcp_app.protocol.dispatch import dispatch
from mcp_app.protocol.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_app.selfcheck import checks
from mcp_app.selfcheck.report import ERROR, INFO, WARNING, Finding, Report, fix_url
from mcp_app.upstreams import service

# A dry run waits at most this long (or the tool's own timeout, if shorter).
DRY_RUN_SECONDS = 10.0
# An upstream server that does not answer what it offers within this long counts as unreachable.
UPSTREAM_SECONDS = 5.0
CLIENT_INFO = {"name": "self-check", "version": "1"}
# The phrases protocol/tools.py's result check (`_finish_result`) answers a broken output schema with.
OUTPUT_SCHEMA_PHRASES = ("does not match its output schema", "returned no structured output")


def safe_to_call(tool: ToolDef) -> bool:
    """Whether a dry run may call the tool (AMB-244): it says it only reads (readOnlyHint true) and
    reaches nothing outside (openWorldHint false: absent means true), or it is a template (which only
    renders); it asks no one (no approval, not a form, no sampling) and runs inline (no worker's job)."""
    notes = tool.annotations if isinstance(tool.annotations, dict) else {}
    marked = notes.get("readOnlyHint") is True and notes.get("openWorldHint") is False
    config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
    asks = tool.handler == "form" or (tool.handler == "llm" and "endpoint" not in config)
    return (
        (marked or tool.handler == "template")
        and not asks
        and tool.approval == "off"
        and tool.execution == "inline"
        and not config.get("connection")
    )


async def listings(tenant: TenantInfo) -> dict[str, dict[str, Listing]]:
    """Every list method's answer in every revision: revision → method → listing."""
    found: dict[str, dict[str, Listing]] = {}
    for version in ALL_VERSIONS:
        answers = await asyncio.gather(*(list_all(tenant, version, m, None) for m in LIST_METHODS))
        found[version] = {listing.method: listing for listing in answers}
    return found


def listing_findings(
    listed: dict[str, dict[str, Listing]], cat: Catalog, tenant_id: int = 0
) -> list[Finding]:
    """What the lists show a client: a list that fails, a tool a revision should see and does not."""
    found: list[Finding] = []
    for version, methods in listed.items():
        for method, listing in methods.items():
            if listing.error is not None:
                found.append(Finding(ERROR, "tenant", "", "listing",
                                     f"{method} answers {version} clients an error: "
                                     f"{listing.error.get('message', listing.error)}.",
                                     fix_url("tenant", tenant_id)))  # fmt: skip
    # Per revision, its listed tools by name (a tenant may have thousands: no scan per tool).
    listed_tools = {
        version: {t.get("name"): t for t in methods["tools/list"].items if isinstance(t, dict)}
        for version, methods in listed.items()
    }
    for tool in cat.tools:
        if tool.app_only:
            # MCP Apps: an app-only tool stays out of every model-facing list (AMB-273), by design.
            found.append(Finding(INFO, "tool", tool.name, "listing",
                                 "Only clients that show MCP Apps see it (its visibility is the app alone): "
                                 "the app calls it, the model never does.", fix_url("tool", tool.id)))  # fmt: skip
            continue
        wanted = [v for v in ALL_VERSIONS if tool.legacy or is_modern(v)]
        missing = [v for v in wanted if tool.name not in listed_tools[v]]
        if missing:
            found.append(Finding(ERROR, "tool", tool.name, "listing",
                                 f"Not listed to {', '.join(missing)} clients, which should see it.",
                                 fix_url("tool", tool.id)))  # fmt: skip
        for version in wanted:
            item = listed_tools[version].get(tool.name)
            schema = item.get("inputSchema") if item else None
            if item and not (isinstance(schema, dict) and schema.get("type") == "object"):
                found.append(Finding(ERROR, "tool", tool.name, "listing",
                                     f"{version} clients get no object input schema for it.",
                                     fix_url("tool", tool.id)))  # fmt: skip
                break
    return found


def _capabilities(tool: ToolDef) -> dict[str, Any]:
    """None, so that each question the tool asks shows; for an app-only tool, MCP Apps (AMB-279): it is
    called as its app calls it, from a host that declares the extension, the only client that may call
    it (a model-facing client is told it is unknown, by design: AMB-273)."""
    return ui_apps.with_support({}) if tool.app_only else {}


def _context(tenant: TenantInfo, tool: ToolDef) -> RequestContext:
    return RequestContext(
        tenant=tenant, protocol_version=LATEST_MODERN, user_id=None, request_id="self-check",
        cancelled=asyncio.Event(), client_capabilities=_capabilities(tool),
    )  # fmt: skip


def _call(tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 tools/call declaring no client capability (`_capabilities`)."""
    meta = {
        META_PROTOCOL_VERSION: LATEST_MODERN, META_CLIENT_CAPABILITIES: _capabilities(tool),
        META_CLIENT_INFO: CLIENT_INFO,
    }  # fmt: skip
    params = {"name": tool.name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": "self-check", "method": "tools/call", "params": params}


def _text(result: dict[str, Any]) -> str:
    texts = [b.get("text", "") for b in result.get("content") or [] if isinstance(b, dict)]
    return " ".join(t for t in texts if t)[:300]


async def dry_run(tenant: TenantInfo, tool: ToolDef) -> Finding | None:
    """Call the tool once as a 2026-07-28 client would, with arguments made from its schema."""
    arguments = sample_arguments(tool.input_schema)
    try:
        if schemas.errors(tool.input_schema, arguments):
            return None  # checks.tool_examples said so: the call would only be refused
    except schemas.InvalidSchema:
        return None

    def finding(severity: str, message: str) -> Finding:
        return Finding(severity, "tool", tool.name, "dry-run", message, fix_url("tool", tool.id))

    deadline = min(DRY_RUN_SECONDS, float(tool.timeout_seconds))
    try:
        async with asyncio.timeout(deadline):
            response = await dispatch(_context(tenant, tool), _call(tool, arguments))
    except TimeoutError:
        return finding(WARNING, f"The dry run with {arguments} did not answer within {deadline:g} s.")
    assert response is not None
    if "error" in response:
        error = response["error"]
        if error.get("code") == MISSING_REQUIRED_CLIENT_CAPABILITY:
            needed = ", ".join(sorted((error.get("data") or {}).get("requiredCapabilities") or {}))
            return finding(INFO, f"Needs the client capability {needed}: clients without it get an error.")
        return finding(WARNING, f"The dry run was answered a protocol error: {error.get('message')}.")
    result = response["result"]
    if result.get("resultType") == "input_required":
        return finding(INFO, "Asks the client a question before it answers: clients that cannot answer "
                             "get an error.")  # fmt: skip
    if result.get("isError"):
        text = _text(result)
        if any(phrase in text for phrase in OUTPUT_SCHEMA_PHRASES):
            return finding(ERROR, f"Its output breaks its own output schema, so every call fails: {text}")
        return finding(WARNING, f"The dry run with {json.dumps(arguments)} answered an error: {text}")
    return None


async def resolved_ssrf(tools: tuple[ToolDef, ...]) -> list[Finding]:
    """The guard's decision with the host resolved, as the call makes it (nothing is fetched)."""
    found = []
    for tool in tools:
        for url in checks.tool_urls(tool):
            try:
                ssrf.check_url_statically(url)
            except ssrf.SsrfRefused:
                continue  # checks.tool_ssrf reported it
            try:
                await ssrf.vet_url(url)
            except ssrf.SsrfRefused as exc:
                found.append(checks.refused(tool, url, exc.message))
    return found


def _upstream_targets(tenant_id: int) -> list[tuple[Upstream, federation.Target | str]]:
    targets: list[tuple[Upstream, federation.Target | str]] = []
    for upstream in Upstream.objects.filter(tenant_id=tenant_id, enabled=True).order_by("name"):
        try:
            target = service.target(upstream)
        except federation.UpstreamError as exc:
            targets.append((upstream, exc.message))
            continue
        seconds = min(float(target.timeout_seconds), UPSTREAM_SECONDS)
        targets.append((upstream, dataclasses.replace(target, timeout_seconds=seconds)))
    return targets


async def _unreachable(target: federation.Target | str) -> str | None:
    """Why the upstream cannot be reached (its secrets unreadable, no answer, an error), or None."""
    if isinstance(target, str):
        return target
    try:
        async with asyncio.timeout(UPSTREAM_SECONDS + 1):
            await federation.discover(target)
    except federation.UpstreamError as exc:
        return exc.message
    except TimeoutError:
        return f"no answer within {UPSTREAM_SECONDS:g} s"
    return None


async def upstream_findings(tenant_id: int) -> tuple[int, list[Finding]]:
    """Each enabled upstream server asked what it offers; (how many, the unreachable ones)."""
    targets = await sync_to_async(_upstream_targets)(tenant_id)
    found = []
    for upstream, target in targets:
        if (problem := await _unreachable(target)) is not None:
            found.append(Finding(ERROR, "upstream", upstream.name, "upstream",
                                 f"Unreachable ({problem}): its published tools, prompts and resources "
                                 "fail for every client.", fix_url("upstream", upstream.pk)))  # fmt: skip
    return len(targets), found


async def run(slug: str, network: bool = True) -> Report:
    """The tenant's report (the tenant is the caller's to check: the views and the command decide)."""
    report = Report(tenant=slug, network=network)
    tenant = await catalog.get_tenant(slug)
    if tenant is None:
        report.findings.append(Finding(ERROR, "tenant", slug, "listing",
                                       "The tenant is inactive: its endpoint answers 404 to every client."))  # fmt: skip
        return report
    cat = await catalog.get_catalog(tenant.id)
    report.checked = {
        "tool": len(cat.tools), "prompt": len(cat.prompts), "resource": len(cat.resources),
        "template": len(cat.templates),
    }  # fmt: skip
    listed = await listings(tenant)
    report.listed = {version: listed[version]["tools/list"].names for version in ALL_VERSIONS}
    report.findings += await sync_to_async(checks.check_definitions)(
        cat.tools, cat.prompts, cat.resources, cat.templates
    )
    report.findings += listing_findings(listed, cat, tenant.id)
    if network:
        report.findings += await resolved_ssrf(cat.tools)
        for tool in filter(safe_to_call, cat.tools):
            if (outcome := await dry_run(tenant, tool)) is not None:
                report.findings.append(outcome)
            report.dry_runs.append(tool.name)
        report.checked["upstream"], unreachable = await upstream_findings(tenant.id)
        report.findings += unreachable
    return report
