"""PostgreSQL connections the platform holds (issue 35 §2, AMB-365): per Daphne process and per Celery
worker, straight to PostgreSQL and through PgBouncer in transaction pooling.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/5 \
        .venv/bin/python bench/connections.py [--seconds 10] [--clients 32] [--pool 4]

Prints figures; it is not a test. A scratch database (DATABASE_URL's server) with the demo tenant. For
each layout, one Daphne under --clients MCP clients calling `echo` and 16 management-API readers (every
read runs SQL; a warm MCP call runs none), then a Celery worker (concurrency 2) running background
calls: the most server connections PostgreSQL saw for the database (sampled every 50 ms), the
connections the processes kept afterwards, and the API reads a second (the per-transaction wall and the
pooler's hop, against the direct layout in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen import McpClient  # noqa: E402
from procs import (  # noqa: E402
    HOST,
    PYTHON,
    celery_worker,
    daphne_server,
    prepare_database,
    run_checked,
    running,
    wait_workers_ready,
    with_db_name,
)

from tests.fleet.pgbouncer import start_pgbouncer  # noqa: E402

NAME = "mcp_bench_connections"


def backends(admin: str, database: str, application: str = "%") -> int:
    """Server connections to `database`, of the processes whose DATABASE_URL names `application`."""
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
            " AND application_name LIKE %s",
            (database, application),
        ).fetchone()
    return int(row[0]) if row else 0


def named(env: dict[str, str], application: str) -> dict[str, str]:
    """`env` whose connections say `application` (PgBouncer's server connections say its own client's)."""
    return dict(env, DATABASE_URL=f"{env['DATABASE_URL']}?application_name={application}")


async def sample(admin: str, stop: asyncio.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(backends, admin, NAME))
        await asyncio.sleep(0.05)


async def load(port: int, token: str, clients: int, seconds: float) -> tuple[int, int]:
    """MCP `echo` calls and API reads for `seconds`: (calls, reads) done."""
    deadline = time.monotonic() + seconds
    mcp = [McpClient(HOST, port, "/t/demo/mcp") for _ in range(clients)]
    await asyncio.gather(*(client.initialize() for client in mcp))
    done = [0, 0]

    async def caller(client: McpClient) -> None:
        while time.monotonic() < deadline:
            await client.call_echo("hello")
            done[0] += 1

    async def reader(http: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            answer = await http.get(f"http://{HOST}:{port}/api/v1/tenants/demo/tools/")
            if answer.status_code != 200:
                raise SystemExit(f"API read answered {answer.status_code}: {answer.text[:300]}")
            done[1] += 1

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        await asyncio.gather(*(caller(c) for c in mcp), *(reader(http) for _ in range(16)))
    for client in mcp:
        await client.close()
    return done[0], done[1]


async def background(port: int, calls: int) -> None:
    clients = [McpClient(HOST, port, "/t/demo/mcp") for _ in range(calls)]
    await asyncio.gather(*(client.initialize() for client in clients))
    await asyncio.gather(
        *(
            client.request("tools/call", {"name": "count_in_background", "arguments": {"n": 2, "delay": 0.1}})
            for client in clients
        )
    )
    for client in clients:
        await client.close()


async def measure(env: dict[str, str], admin: str, clients: int, seconds: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    with running(daphne_server(named(env, "mcp-web"), None, label="conns")) as server:
        await server.wait_ready()
        # For this server's API audience (its MCP_PUBLIC_URL).
        token = run_checked([PYTHON, "manage.py", "api_token", "admin"], server.env, "api_token").split()[-1]
        stop, peak = asyncio.Event(), [0]
        sampler = asyncio.create_task(sample(admin, stop, peak))
        calls, reads = await load(server.port, token, clients, seconds)
        stop.set()
        await sampler
        figures.update(daphne_peak=peak[0], daphne_kept=backends(admin, NAME))
        figures.update(calls_per_s=calls / seconds, reads_per_s=reads / seconds)
        with running(celery_worker(named(env, "mcp-worker"), None, label="conns-worker")) as worker:
            wait_workers_ready([worker])
            idle = backends(admin, NAME, "mcp-worker")
            await background(server.port, 8)
            figures.update(worker_idle=idle, worker_after=backends(admin, NAME, "mcp-worker"))
            figures.update(all_after=backends(admin, NAME))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--pool", type=int, default=4, help="PgBouncer's server connections per database")
    args = parser.parse_args()
    base, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not base.startswith("postgres") or not redis_url:
        sys.exit("bench/connections.py needs DATABASE_URL (PostgreSQL) and REDIS_URL")
    url = with_db_name(base, NAME)
    admin = with_db_name(base, "postgres").replace("postgres://", "postgresql://", 1)
    env = prepare_database(url, redis_url)
    env.update(MCP_BACKGROUND_TOOLS="celery")
    direct = asyncio.run(measure(env, admin, args.clients, args.seconds))
    with tempfile.TemporaryDirectory(prefix="mcp-bench-pgbouncer-") as folder:
        bouncer = start_pgbouncer(url, Path(folder), pool=args.pool)
        try:
            pooled_env = dict(env, DATABASE_URL=bouncer.url(url), DATABASE_POOLING="transaction")
            pooled = asyncio.run(measure(pooled_env, admin, args.clients, args.seconds))
        finally:
            bouncer.stop()
    print(f"\nPostgreSQL connections, {args.clients} MCP clients + 16 API readers for {args.seconds:.0f} s")
    print(f"{'':40}{'direct':>10}{f'PgBouncer (pool {args.pool})':>22}")
    rows = [
        ("one Daphne, most at once", "daphne_peak", "{:.0f}"),
        ("one Daphne, kept after the load", "daphne_kept", "{:.0f}"),
        ("a Celery worker (concurrency 2), idle", "worker_idle", "{:.0f}"),
        ("the worker after 8 background calls", "worker_after", "{:.0f}"),
        ("everything after them", "all_after", "{:.0f}"),
        ("MCP echo calls/s", "calls_per_s", "{:.0f}"),
        ("API reads/s (SQL on each)", "reads_per_s", "{:.0f}"),
    ]
    for label, key, form in rows:
        print(f"{label:40}{form.format(direct[key]):>10}{form.format(pooled[key]):>22}")
    print(f"API reads pooled/direct: {pooled['reads_per_s'] / direct['reads_per_s']:.2f}x")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
