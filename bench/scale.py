"""Tenant scale: a tools/list page fetch on a tenant with many tools vs a small one, and on a tenant
whose tools are published from 10 upstream MCP servers, one of them dead, vs one with as many native
tools (issue 22: within 20%). The live upstreams are the SDK's reference server; the dead one's port
has nothing listening, so the serving process's list-change watch keeps failing to reach it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from urllib.parse import urlsplit

from loadgen import (  # noqa: E402
    McpClient,
    PhaseResult,
    merge,
    run_phase,
)
from procs import (  # noqa: E402
    HOST,
    PYTHON,
    ROOT,
    Affinity,
    Server,
    daphne_server,
    free_port,
    log,
    prepare_database,
    reference_server,
    run_checked,
    running,
    with_db_name,
)

SCALE_SETUPS = {
    # label: (database suffix, tenants in the database, tools of the measured tenant)
    "small": ("scale_small", 10, 10),
    "large": ("scale_large", 10_000, 1_000),
    "federated": ("scale_federated", 10_000, 1_000),
}
# The federated setup's tools come from this many upstreams (the first one dead).
FEDERATED_UPSTREAMS = 10


# The scale servers share one Redis, where per-tenant keys are named by tenant id.
SCALE_TARGET_IDS = {"small": 900_001, "large": 900_002, "federated": 900_003}


# 10 = every page of both tenants holds the same number of tools (a like-for-like page);
# None = the server's default page size (the large tenant's pages are then bigger).
SCALE_PAGE_SIZES = (10, None)


ScaleResult = dict[tuple[int | None, str], tuple[PhaseResult, int, list[int]]]


async def measure_pages(
    servers: dict[str, Server], seconds: float, rounds: int
) -> dict[str, tuple[PhaseResult, int, list[int]]]:
    """From one client per server, fetch the tenant's tools/list pages in a loop; time each page.

    The servers are loaded one at a time, in alternating slices, like the main comparison.
    """
    clients: dict[str, McpClient] = {}
    shape: dict[str, tuple[int, list[int]]] = {}
    for label, server in servers.items():
        await server.wait_ready()
        client = clients[label] = McpClient(HOST, server.port, server.path)
        await client.initialize()
        # Walk all pages once: warms the catalog and learns the page sizes.
        sizes: list[int] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor)
            sizes.append(len(page["tools"]))
            cursor = page.get("nextCursor")
            if not cursor or len(sizes) > 10_000:
                break
        shape[label] = (sum(sizes), sizes)
    cursors: dict[int, str | None] = {}

    async def op(c: McpClient, n: int) -> None:
        # Cycle through every page: page 1, 2, ..., last, 1, ...
        page = await c.list_tools(cursors.get(id(c)))
        cursors[id(c)] = page.get("nextCursor")

    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    labels = list(servers)
    for rnd in range(rounds):
        for label in labels if rnd % 2 == 0 else list(reversed(labels)):
            raw[label].append(
                await run_phase(
                    "tools/list page", [clients[label]], op, seconds / rounds, 0.5, servers[label].pid
                )
            )

    for client in clients.values():
        await client.delete_session()
        await client.close()
    return {label: (merge(rs), *shape[label]) for label, rs in raw.items()}


def scale_bench(
    base_url: str, redis_url: str, affinity: Affinity, seconds: float, rounds: int
) -> ScaleResult:
    """Fill one database per setup, then time tools/list pages of each at each page size."""
    envs: dict[str, dict[str, str]] = {}
    per_upstream = SCALE_SETUPS["federated"][2] // FEDERATED_UPSTREAMS
    # The live upstreams offer the tools published from them, so their syncs withdraw none.
    upstream = reference_server(json_response=True, cores=affinity.server, extra_tools=per_upstream)
    for label, (suffix, tenants, tools) in SCALE_SETUPS.items():
        url = with_db_name(base_url, f"{urlsplit(base_url).path.lstrip('/')}_{suffix}")
        log(f"scale {label}: preparing {tenants} tenants, measured tenant with {tools} tools")
        env = prepare_database(url, redis_url)
        # Every server alike: the upstreams (loopback) pass the SSRF guard only when allow-listed.
        env["MCP_HTTP_HANDLER_ALLOW"] = HOST
        t0 = time.monotonic()
        command = [
            PYTHON,
            str(ROOT / "bench" / "scale_setup.py"),
            "--tenants",
            str(tenants),
            "--tools",
            str(tools),
            "--target-id",
            str(SCALE_TARGET_IDS[label]),
        ]
        if label == "federated":
            command += [
                "--upstreams",
                str(FEDERATED_UPSTREAMS),
                "--upstream-url",
                f"http://{HOST}:{upstream.port}{upstream.path}",
                "--dead-url",
                f"http://{HOST}:{free_port()}/mcp",
            ]
        out = run_checked(command, env, f"scale setup {label}")
        log(f"scale {label}: {out.strip()} (bulk_create {time.monotonic() - t0:.1f}s)")
        envs[label] = env
    results: ScaleResult = {}
    for page_size in SCALE_PAGE_SIZES:
        servers: dict[str, Server] = {}
        for label, env in envs.items():
            if page_size is not None:
                env = dict(env, MCP_PAGE_SIZE=str(page_size))
            server = daphne_server(env, affinity.server, label=f"scale-{label}")
            server.path = "/t/scale-target/mcp"
            servers[label] = server
        with contextlib.ExitStack() as stack:
            stack.enter_context(running(upstream))
            for server in servers.values():
                stack.enter_context(running(server))
            log(f"scale: timing pages (page size {page_size or 'default'})")
            for label, value in asyncio.run(measure_pages(servers, seconds, rounds)).items():
                results[(page_size, label)] = value
    return results


def print_scale(scale: ScaleResult) -> list[str]:
    lines = [
        "| page size | setup | tenants in DB | tools of tenant | pages (tools per page) | page fetches | p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    verdicts = []
    for page_size in SCALE_PAGE_SIZES:
        for label, (_, tenants, _) in SCALE_SETUPS.items():
            if (page_size, label) not in scale:
                continue
            r, total, sizes = scale[(page_size, label)]
            per_page = f"{sizes[0]}" if len(set(sizes)) == 1 else f"{sizes[0]}, last {sizes[-1]}"
            lines.append(
                f"| {page_size or 'default'} | {label} | {tenants:,} | {total:,} | {len(sizes)} ({per_page}) | "
                f"{r.requests:,} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {sum(r.errors.values())} |"
            )
        small, large = scale.get((page_size, "small")), scale.get((page_size, "large"))
        federated = scale.get((page_size, "federated"))
        if large and federated:
            p50, p99 = federated[0].pct(0.5) / large[0].pct(0.5), federated[0].pct(0.99) / large[0].pct(0.99)
            verdict = "MET" if p99 <= 1.2 else "NOT MET"
            verdicts.append(
                f"- page size {page_size or 'default'}: {FEDERATED_UPSTREAMS} upstreams (one dead) / native, "
                f"same tools: p50 {p50:.2f}x, p99 {p99:.2f}x -> {verdict} (goal: p99 within 20%)"
            )
        if small and large:
            p50, p99 = large[0].pct(0.5) / small[0].pct(0.5), large[0].pct(0.99) / small[0].pct(0.99)
            verdict = "MET" if p50 <= 1.2 and p99 <= 1.2 else "NOT MET"
            verdicts.append(
                f"- page size {page_size or 'default'}: per-page large/small p50 {p50:.2f}x, p99 {p99:.2f}x "
                f"-> {verdict} (goal: within 20%)"
                + (
                    ""
                    if page_size
                    else "; pages of the large tenant hold more tools, so this is not like for like"
                )
            )
    lines.append("")
    lines.extend(verdicts)
    for line in lines:
        print(line)
    for key, (r, _, _) in scale.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR scale {key}: {count} x {err}")
    return lines
