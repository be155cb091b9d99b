"""What a tenant's policies, guardrails and quotas cost the request path, side by side in one run
(issue 34 "Speed", AMB-347, AMB-354).

    .venv/bin/python bench/policies.py [--rounds 7] [--calls 300] [--lists 30]

Prints figures; it is not a test. One scratch SQLite database in a temporary folder (migrated here),
three tenants of 1,000 template tools each (one of them `echo`), the second with 20 policies (deny and
allow, on the caller, the target and the arguments, one of them reading the arguments of every call),
the third with those and 3 guardrails (secrets on arguments, personal data redacted on results, one
RE2 pattern on both) and a quota on every tool (never reached). Then a 1 MB result (prose with
numbers, no finding) through the three guardrails, median of --scans. Last, one decision of a call of
six arguments under a policy reading one of them, handed only that key and handed them all (AMB-377).
Requests go through the dispatcher in this process, as the transport hands them over (no HTTP: the
transport's cost is the same for both and would only add noise). Slices alternate between the two
tenants, each slice a warm `tools/call echo` loop and a `tools/list` loop (a list of 1,000 tools, five
pages of the default page size walked whole); the medians of the slices are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FOLDER = tempfile.mkdtemp(prefix="mcp-policies-bench-")
os.environ.update(
    DJANGO_SETTINGS_MODULE="mcpsite.settings",
    DATABASE_URL=f"sqlite:///{FOLDER}/bench.sqlite3",
    REDIS_URL="",
    MCP_CHANGE_TOKEN_SUBSCRIBER="0",
    # The per-caller rate limit would measure itself: both tenants' loops run far past it.
    MCP_TOOL_CALLS_PER_MINUTE="0",
)

import django  # noqa: E402 - after the settings are chosen

django.setup()

from django.core.management import call_command  # noqa: E402

from tenants import wall  # noqa: E402

TOOLS = 1_000
POLICIES = [
    ("deny", "tools", "caller.auth == 'api_key' && target.annotations.destructiveHint == true"),
    ("deny", "tools", "target.name == 'echo' && arguments.message.contains('password')"),
    ("deny", "prompts", "caller.role == 'viewer'"),
    ("allow", "all", "true"),
    *(
        ("deny", "tools", f"target.name == 'never_{i}' || target.upstream == 'nowhere_{i}'")
        for i in range(16)
    ),
]


GUARDRAILS = [
    {"name": "keys-in", "detector": "secrets", "where": "arguments", "action": "block"},
    {"name": "personal-out", "detector": "personal_data", "where": "results", "action": "redact"},
    {"name": "internal-ids", "detector": "pattern", "pattern": "INT-[0-9]{6}", "where": "both"},
]


def seed() -> tuple[Any, Any, Any]:
    from mcp_app.models import Guardrail, Policy, Quota, Tool  # noqa: PLC0415 - after django.setup()
    from tenants.models import Tenant  # noqa: PLC0415

    with wall.bypass("bench"):
        call_command("migrate", verbosity=0)
        tenants = []
        for slug in ("plain", "governed", "guarded"):
            tenant = Tenant.objects.create(slug=slug, name=slug, auth_mode="public")
            Tool.objects.bulk_create(
                Tool(tenant=tenant, name="echo" if i == 0 else f"tool_{i:04d}", handler="template",
                     handler_config={"text": "{{ message }}"}, version=1,
                     input_schema={"type": "object", "properties": {"message": {"type": "string"}}})
                for i in range(TOOLS)
            )  # fmt: skip
            tenants.append(tenant)
        for tenant in tenants[1:]:
            for i, (effect, applies_to, condition) in enumerate(POLICIES):
                Policy.objects.create(tenant=tenant, name=f"p{i:02d}", effect=effect, applies_to=applies_to,
                                      condition=condition)  # fmt: skip
        for fields in GUARDRAILS:
            Guardrail.objects.create(tenant=tenants[2], **fields)
        Quota.objects.create(tenant=tenants[2], name="all", calls=10_000_000, window="minute")
        for tenant in tenants:
            tenant.bump_version()
    return tenants[0], tenants[1], tenants[2]


async def one_slice(ctx: Any, calls: int, lists: int) -> tuple[float, float]:
    from mcp_app.protocol.dispatch import dispatch  # noqa: PLC0415

    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hi"}},
    }
    started = time.perf_counter()
    for _ in range(calls):
        reply = await dispatch(ctx, call)
        assert reply is not None and "result" in reply, reply
    per_call = (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for _ in range(lists):
        cursor = None
        count = 0
        while True:
            params = {"cursor": cursor} if cursor else {}
            reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params})
            assert reply is not None
            count += len(reply["result"]["tools"])
            if not (cursor := reply["result"].get("nextCursor")):
                break
        assert count == TOOLS, count
    per_list = (time.perf_counter() - started) / lists
    return per_call, per_list


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--lists", type=int, default=30)
    parser.add_argument("--scans", type=int, default=9)
    args = parser.parse_args()
    from asgiref.sync import sync_to_async  # noqa: PLC0415

    from mcp_app.catalog.loader import tenant_info  # noqa: PLC0415
    from mcp_app.core.context import RequestContext  # noqa: PLC0415
    from mcp_app.core.versions import LATEST_MODERN  # noqa: PLC0415

    plain, governed, guarded = await sync_to_async(seed)()
    labels = (("none", plain), ("20 policies", governed), ("+ 3 guardrails, a quota", guarded))
    contexts = {
        name: RequestContext(
            tenant=tenant_info(tenant), protocol_version=LATEST_MODERN, client_address="127.0.0.1"
        )
        for name, tenant in labels
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in contexts}
    for ctx in contexts.values():  # warm: catalogs loaded, policies compiled, list decisions cached
        await one_slice(ctx, 20, 2)
    for _ in range(args.rounds):
        for name, ctx in contexts.items():
            figures[name].append(await one_slice(ctx, args.calls, args.lists))
    call = {n: statistics.median(c for c, _ in f) for n, f in figures.items()}
    listing = {n: statistics.median(li for _, li in f) for n, f in figures.items()}
    print(f"| tenant | tools/call echo µs | calls/s | tools/list of {TOOLS} tools (whole) ms |")
    print("|---|---:|---:|---:|")
    for name in contexts:
        print(f"| {name} | {call[name] * 1e6:.0f} | {1 / call[name]:.0f} | {listing[name] * 1e3:.2f} |")
    governed_name = labels[2][0]
    print(
        f"\nthroughput with policies / without: {call['none'] / call['20 policies']:.2f}x; "
        f"list p50 with / without: {listing['20 policies'] / listing['none']:.2f}x; "
        f"throughput with policies, guardrails and a quota / without: {call['none'] / call[governed_name]:.2f}x"
    )
    print(f"a 1 MB result through the 3 guardrails: {await scan_megabyte(guarded, args.scans) * 1e3:.1f} ms (median)")
    read, whole = keys_read_or_whole()
    print(f"a decision of six arguments under a policy reading one: {read:.1f} µs, {whole:.1f} µs handed whole (AMB-377)")


async def scan_megabyte(tenant: Any, scans: int) -> float:
    from mcp_app import catalog as catalogs  # noqa: PLC0415
    from mcp_app.governance import guardrails  # noqa: PLC0415

    catalog = await catalogs.get_catalog(tenant.id)
    prose = "Order 12345 shipped on 2026-11-30 to the warehouse at dock 7, 3 pallets of 40 boxes. "
    result = {"content": [{"type": "text", "text": (prose * (1_000_000 // len(prose) + 1))[:1_000_000]}]}
    times = []
    for _ in range(scans):
        started = time.perf_counter()
        outcome = guardrails.scan_now(catalog, "echo", result, "result", "tool")
        times.append(time.perf_counter() - started)
        assert outcome.blocked is None and not outcome.findings
    return statistics.median(times)


def keys_read_or_whole() -> tuple[float, float]:
    """One call's decision (µs, best of 5) when CEL is handed only the argument keys its policy reads, and
    when it is handed them all (AMB-377): a search tool's six arguments, a policy reading `query`."""
    from mcp_app.core.context import RequestContext  # noqa: PLC0415
    from mcp_app.core.types import Catalog, PolicyDef, TenantInfo, ToolDef  # noqa: PLC0415
    from mcp_app.governance import decision  # noqa: PLC0415

    tool = ToolDef(id=1, name="search", title="", description="", input_schema={}, output_schema=None,
                   annotations={}, icons=[], meta={}, handler="template", handler_config={})  # fmt: skip
    policy = PolicyDef(name="p", effect="deny", applies_to="tools", condition="arguments.query.contains('password')")
    figures = []
    for tenant_id, handed_whole in ((-1, False), (-2, True)):
        catalog = Catalog(tenant_id=tenant_id, version=1, tools=(tool,), tools_by_name={"search": tool},
                          policies=(policy,))  # fmt: skip
        ctx = RequestContext(tenant=TenantInfo(id=tenant_id, slug="t", name="t"))
        arguments = {"query": "hello world", "limit": 10, "language": "en", "sort": "relevance",
                     "filters": {"kind": "doc", "owner": "me"}, "fields": ["title", "url", "snippet"]}  # fmt: skip
        decision.check(ctx, catalog, tool, arguments)
        if handed_whole:
            for key, listed in list(decision._FAST.items()):
                if key[0] == tenant_id:
                    decision._FAST[key] = dataclasses.replace(listed, argument_keys=None)
        timed = functools.partial(decision.check, ctx, catalog, tool, arguments)
        best = min(timeit.repeat(timed, number=20_000, repeat=5))
        figures.append(best / 20_000 * 1e6)
    return figures[0], figures[1]


if __name__ == "__main__":
    asyncio.run(main())
