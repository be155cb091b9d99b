"""Many tenants, one process (issue 35 §4, AMB-367): memory per tenant catalog, a process's total as it
serves more tenants than MCP_CATALOG_TENANTS, a cold tenant's first request, and `tools/list` on one
tenant when 10 tenants exist against when --tenants exist.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/5 \
        .venv/bin/python bench/catalogs.py [--tenants 100000] [--served 3000] [--bound 1000]

Prints figures; it is not a test. A scratch database with --tenants public tenants (bulk inserts), the
first --served of them with 10 template tools each (schemas like the demo's). One Daphne with
MCP_CATALOG_TENANTS=--bound, driven on the 2026-07-28 wire (no session): its RSS after a warm-up,
after `tools/list` of 10, --bound and --served distinct tenants; each tenant's first `tools/list` (cold:
its facts and catalog loaded) against a repeated one (warm); then the `tools/list` p50 of one warm
tenant, measured in the same process before the other tenants exist and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import psycopg
from loadgen import ModernClient, proc_rss_kib
from procs import HOST, daphne_server, prepare_database, running, with_db_name

NAME = "mcp_bench_catalogs"
TOOLS = 10
SCHEMA = (
    '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}, "required": ["name"]}'
)


def text(value: object) -> object:
    """A value read back as it goes into COPY (JSON columns come back as Python objects)."""
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def add_tenants(url: str, first: int, count: int, with_tools: int) -> None:
    """`count` public tenants `cat-<n>` from n=`first`; the first `with_tools` of them with TOOLS tools."""
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        columns = [
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'tenants_tenant'"
                " AND column_default IS NULL AND is_nullable = 'NO' AND column_name <> 'id'"
            )
        ]
        demo = conn.execute(f"SELECT {', '.join(columns)} FROM tenants_tenant WHERE slug = 'demo'").fetchone()
        assert demo is not None
        values = dict(zip(columns, demo, strict=True))
        last = conn.execute("SELECT max(id) FROM tenants_tenant").fetchone()[0]  # type: ignore[index]
        with conn.cursor().copy(f"COPY tenants_tenant ({', '.join(columns)}) FROM STDIN") as copy:
            for n in range(first, first + count):
                copy.write_row(
                    [
                        f"cat-{n}" if c == "slug" else f"Cat {n}" if c == "name" else text(values[c])
                        for c in columns
                    ]
                )
        conn.execute("UPDATE tenants_tenant SET auth_mode = 'public' WHERE slug LIKE 'cat-%'")
        tool_columns = [
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'mcp_app_tool'"
                " AND column_default IS NULL AND is_nullable = 'NO' AND column_name <> 'id'"
            )
        ]
        echo = conn.execute(
            f"SELECT {', '.join(tool_columns)} FROM mcp_app_tool t WHERE name = 'echo'"
            " AND tenant_id = (SELECT id FROM tenants_tenant WHERE slug = 'demo')"
        ).fetchone()
        assert echo is not None, "the demo tenant's echo tool"
        template = dict(zip(tool_columns, echo, strict=True))
        ids = conn.execute(
            "SELECT id, slug FROM tenants_tenant WHERE id > %s ORDER BY id LIMIT %s", (last, with_tools)
        ).fetchall()
        with conn.cursor().copy(f"COPY mcp_app_tool ({', '.join(tool_columns)}) FROM STDIN") as copy:
            for tenant_id, _slug in ids:
                for i in range(TOOLS):
                    row = dict(template, tenant_id=tenant_id, name=f"tool_{i}", input_schema=SCHEMA)
                    row["description"] = f"Tool {i} of this tenant: greets the name it is given."
                    copy.write_row([text(row[c]) for c in tool_columns])


async def list_tools(port: int, slug: str, times: int = 1) -> list[float]:
    client = ModernClient(HOST, port, f"/t/{slug}/mcp")
    taken = []
    try:
        for _ in range(times):
            started = time.perf_counter()
            result = await client.request("tools/list", {})
            taken.append(time.perf_counter() - started)
            assert len(result["tools"]) >= 1, result
    finally:
        await client.close()
    return taken


async def serve_many(port: int, slugs: list[str], parallel: int = 8) -> list[float]:
    """Each tenant's first tools/list (seconds), `parallel` at a time."""
    gate = asyncio.Semaphore(parallel)
    firsts: list[float] = []

    async def one(slug: str) -> None:
        async with gate:
            firsts.append((await list_tools(port, slug))[0])

    await asyncio.gather(*(one(slug) for slug in slugs))
    return firsts


def p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def main_async(args: argparse.Namespace) -> None:
    base, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    url = with_db_name(base, NAME)
    env = prepare_database(url, redis_url)
    env["MCP_CATALOG_TENANTS"] = str(args.bound)
    add_tenants(url, 0, 10, 10)
    with running(daphne_server(env, None, label="catalogs")) as server:
        await server.wait_ready(wire="modern")
        few = await list_tools(server.port, "cat-0", 5)
        few = await list_tools(server.port, "cat-0", 400)
        rss = {"warm": proc_rss_kib(server.pid) or 0}
        await serve_many(server.port, [f"cat-{n}" for n in range(10)])
        rss["10"] = proc_rss_kib(server.pid) or 0
    add_tenants(url, 10, args.tenants - 10, args.served - 10)
    print(f"{args.tenants} tenants made", flush=True)
    with running(daphne_server(env, None, label="catalogs")) as server:
        await server.wait_ready(wire="modern")
        await list_tools(server.port, "cat-0", 5)
        many = await list_tools(server.port, "cat-0", 400)
        await serve_many(server.port, [f"cat-{n}" for n in range(10)])
        rss["10 again"] = proc_rss_kib(server.pid) or 0
        cold = await serve_many(server.port, [f"cat-{n}" for n in range(10, 110)], parallel=1)
        await serve_many(server.port, [f"cat-{n}" for n in range(110, args.bound)])
        rss[f"{args.bound}"] = proc_rss_kib(server.pid) or 0
        warm = await list_tools(server.port, f"cat-{args.bound - 1}", 200)
        await serve_many(server.port, [f"cat-{n}" for n in range(args.bound, args.served)])
        rss[f"{args.served}"] = proc_rss_kib(server.pid) or 0
    per_catalog = (rss[f"{args.bound}"] - rss["10 again"]) / (args.bound - 10)
    print(f"\nOne Daphne, MCP_CATALOG_TENANTS={args.bound}, tenants of {TOOLS} tools, 2026-07-28 tools/list")
    for label, kib in rss.items():
        print(f"  RSS after tools/list of {label:>9} tenants: {kib / 1024:7.1f} MiB")
    print(f"  per tenant held: {per_catalog:.1f} KiB (RSS growth from 10 to {args.bound} tenants)")
    print(
        f"  a cold tenant's first tools/list (one at a time) p50 {p50_ms(cold):.2f} ms, warm p50 {p50_ms(warm):.2f} ms"
    )
    ratio = p50_ms(many) / p50_ms(few)
    print(
        f"  tools/list of one warm tenant p50: {p50_ms(few):.2f} ms with 10 tenants, {p50_ms(many):.2f} ms"
        f" with {args.tenants} ({ratio:.2f}x)"
    )
    with psycopg.connect(
        with_db_name(base, "postgres").replace("postgres://", "postgresql://", 1), autocommit=True
    ) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=100_000)
    parser.add_argument("--served", type=int, default=3_000)
    parser.add_argument("--bound", type=int, default=1_000)
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
