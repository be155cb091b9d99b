"""Search mode through Daphne (issue 36 §1, AMB-376): `tools/list` and `search_tools` on a tenant of
10,000 tools against the same on a tenant of 10, both in search mode, loaded in alternating slices."""

from __future__ import annotations

import asyncio

from load import Timing, op_list
from loadgen import BenchError, McpClient, PhaseResult
from pairs import PAIR_CONCURRENCY, drive_pair, print_on_off
from procs import PYTHON, Affinity, daphne_server, run_checked, running

SEARCH_GOAL = 0.9  # "as fast as": within the noise of two slices of one process
SEARCH_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
for slug, count in (("search-10", 10), ("search-10k", 10_000)):
    Tenant.objects.filter(slug=slug).delete()
    tenant = Tenant.objects.create(slug=slug, name=slug, auth_mode="public", tool_discovery="search")
    Tool.objects.bulk_create(
        Tool(
            tenant=tenant, name=f"{words[n % 10]}_{words[n // 10 % 10]}_{n:05d}", version=1,
            description=f"Answers about {words[n // 100 % 10]} and {words[n // 1000 % 10]}.",
            handler="template", handler_config={"text": "ok"},
        )
        for n in range(count)
    )
    tenant.save()  # a new definitions version: the catalog is loaded with the tools
"""


async def op_search(client: McpClient, n: int) -> None:
    """search_tools for two words, the best 10."""
    query = ("alpha bravo", "echo golf", "hotel", "india_juliet", "delt")[n % 5]
    result = await client.request("tools/call", {"name": "search_tools", "arguments": {"query": query}})
    if result.get("isError") or '"tools"' not in str(result.get("content")):
        raise BenchError(f"search_tools answered {str(result)[:200]}")


def search_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, dict[str, PhaseResult]]:
    server = daphne_server(env, affinity.server, label="search")
    run_checked([PYTHON, "manage.py", "shell", "-c", SEARCH_SETUP], server.env, "search bench setup")
    targets = {"off": ("/t/search-10/mcp", None), "on": ("/t/search-10k/mcp", None)}
    with running(server):
        return {
            "tools/list": asyncio.run(drive_pair(server, targets, timing, slices, op=op_list)),
            "search_tools": asyncio.run(drive_pair(server, targets, timing, slices, op=op_search)),
        }


def print_search_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## Search mode: a tenant of 10,000 tools vs one of 10, both in search mode, c={PAIR_CONCURRENCY}")
    print()
    print(
        "one Daphne process; rows say tools/call but the first table is tools/list, the second search_tools"
    )
    print()
    for what, results in search_bench(env, affinity, timing, rounds * 2).items():
        print(f"### {what}")
        print()
        # A search costs what its words match (no throughput goal against 10 tools; its own goal, p99
        # <= 20 ms on one core, is bench/tool_search.py's); a search-mode list must cost what it does on 10.
        goal = SEARCH_GOAL if what == "tools/list" else None
        print_on_off(results, "tenant", ("10 tools", "10,000 tools"), f"{what} 10,000 vs 10 tools", goal=goal)
        print()
