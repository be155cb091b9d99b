"""What each unit costs in Redis (issue 35 §4): bytes per legacy session, per stored SSE event and per open
`subscriptions/listen` stream, summed from `MEMORY USAGE` of the keys each one adds; and in PostgreSQL,
bytes per background run (its ToolRun row, with indexes and TOAST).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/6 \
        .venv/bin/python bench/sizing.py [--sessions 500] [--calls 100] [--listens 200]

Prints figures; it is not a test. REDIS_URL's database is flushed first and must be the bench's own. One
Daphne with the demo tenant: --sessions legacy sessions opened (initialize); --calls of them each call
`count_slowly` (10 steps, a progress token: a 2025-11-25 stream whose every event is stored for
resumption); --listens 2026-07-28 listen streams held open. After each step the keys of the database
are grouped by prefix and their bytes summed (the key, its value and Redis's own overhead per key).
Then --questions legacy calls of `ask_user` are left waiting for their answer (a held question: the
elicitation stored as the call's stream event, the call parked in its process). Then a Celery worker
runs --runs background calls of `count_in_background`: the ToolRun table's `pg_total_relation_size`
grows by what they wrote, and Redis by the replies each job keeps for a takeover (AMB-369); and
--tasks task-augmented calls of it (2025-11-25 `params.task`) are measured while in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os

import psycopg
import redis
from loadgen import ListenStream, McpClient, make_clients
from procs import (
    HOST,
    celery_worker,
    daphne_server,
    prepare_database,
    running,
    wait_workers_ready,
    with_db_name,
)

STEPS = 10


class Tasking(McpClient):
    """A 2025-11-25 session: the revision where a call may ask for a task (`params.task`)."""

    async def initialize(self) -> dict[str, object]:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "sizing", "version": "1"},
            },
        )
        await self.notify("notifications/initialized")
        return result


class Asked(McpClient):
    """A client that declares elicitation and, once asked, never answers: its call stays held."""

    capabilities = {"elicitation": {"form": {}}}

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.asked = asyncio.Event()

    async def _on_stream_message(self, msg: dict[str, object]) -> None:
        if msg.get("method") == "elicitation/create":
            self.asked.set()


def by_prefix(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """Key prefix (up to the second colon) -> (keys, bytes)."""
    found: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for key in client.scan_iter(count=1000):
        text = key.decode(errors="replace")
        prefix = ":".join(text.split(":")[:2]) + ":" if text.count(":") >= 2 else text
        usage = client.memory_usage(key, samples=0) or 0
        found[prefix][0] += 1
        found[prefix][1] += int(usage)
    return {prefix: (keys, size) for prefix, (keys, size) in found.items()}


def grew(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {
        prefix: (keys - before.get(prefix, (0, 0))[0], size - before.get(prefix, (0, 0))[1])
        for prefix, (keys, size) in after.items()
        if size != before.get(prefix, (0, 0))[1]
    }


def show(title: str, growth: dict[str, tuple[int, int]], units: int) -> None:
    total = sum(size for _, size in growth.values())
    print(f"\n{title}: {total / units:,.0f} bytes each ({units} of them)")
    for prefix, (keys, size) in sorted(growth.items(), key=lambda item: -item[1][1]):
        print(f"  {prefix:32} {keys / units:5.2f} keys, {size / units:8,.0f} bytes each")


async def main_async(args: argparse.Namespace) -> None:
    base, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    database = with_db_name(base, "mcp_bench_sizing")
    env = prepare_database(database, redis_url)
    env["MCP_BACKGROUND_TOOLS"] = "celery"
    client = redis.Redis.from_url(redis_url)
    with running(daphne_server(env, None, label="sizing")) as server:
        await server.wait_ready()
        start = by_prefix(client)
        clients = await make_clients(args.sessions, HOST, server.port, "/t/demo/mcp")
        opened = by_prefix(client)
        show("A legacy session (initialize, nothing else)", grew(start, opened), args.sessions)

        async def count(index: int) -> None:
            await clients[index].request(
                "tools/call",
                {
                    "name": "count_slowly",
                    "arguments": {"n": STEPS, "delay": 0},
                    "_meta": {"progressToken": index},
                },
            )

        await asyncio.gather(*(count(i) for i in range(args.calls)))
        called = by_prefix(client)
        events = sum(int(client.llen(key)) for key in client.scan_iter(match="mcp:events:*", count=1000))
        show(
            f"A stored SSE event ({STEPS} progress, {STEPS} log messages, the result a call)",
            grew(opened, called),
            events,
        )

        streams = [
            ListenStream(HOST, server.port, "/t/demo/mcp", request_id=i + 1) for i in range(args.listens)
        ]
        await asyncio.gather(*(stream.open() for stream in streams))
        listening = by_prefix(client)
        show("An open subscriptions/listen stream", grew(called, listening), args.listens)
        for stream in streams:
            await stream.close()

        askers = [Asked(HOST, server.port, "/t/demo/mcp") for _ in range(args.questions)]
        await asyncio.gather(*(asker.initialize() for asker in askers))
        before_asking = by_prefix(client)
        held = [
            asyncio.create_task(asker.request("tools/call", {"name": "ask_user", "arguments": {}}))
            for asker in askers
        ]
        await asyncio.wait_for(asyncio.gather(*(asker.asked.wait() for asker in askers)), 60)
        await asyncio.sleep(0.5)
        show(
            "A held question (a legacy call of ask_user waiting for its answer)",
            grew(before_asking, by_prefix(client)),
            args.questions,
        )
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        for asker in askers:
            await asker.close()

        def run_bytes() -> tuple[int, int]:
            with psycopg.connect(database.replace("postgres://", "postgresql://", 1)) as conn:
                row = conn.execute(
                    "SELECT count(*), pg_total_relation_size('mcp_app_toolrun') FROM mcp_app_toolrun"
                ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1])

        with running(celery_worker(env, None, label="sizing-worker")) as worker:
            wait_workers_ready([worker])
            rows, size = run_bytes()
            before_runs = by_prefix(client)
            for start_at in range(0, args.runs, 50):
                batch = clients[start_at % len(clients) : start_at % len(clients) + 50]
                await asyncio.gather(
                    *(
                        c.request(
                            "tools/call", {"name": "count_in_background", "arguments": {"n": 1, "delay": 0}}
                        )
                        for c in batch
                    )
                )
            rows_after, size_after = run_bytes()
            show(
                "A background run's replies kept in Redis (1 step)",
                grew(before_runs, by_prefix(client)),
                args.runs,
            )

            tasking = [Tasking(HOST, server.port, "/t/demo/mcp") for _ in range(args.tasks)]
            await asyncio.gather(*(c.initialize() for c in tasking))
            rows_tasks, size_tasks = run_bytes()
            before_tasks = by_prefix(client)
            for c in tasking:
                created = await c.request(
                    "tools/call",
                    {
                        "name": "count_in_background",
                        "arguments": {"n": 50, "delay": 5},
                        "task": {"ttl": 600_000},
                    },
                )
                assert "task" in created, created
            await asyncio.sleep(3)  # started on the worker or queued: in flight either way
            show(
                "An in-flight task (tasks/get-able, its run queued or running)",
                grew(before_tasks, by_prefix(client)),
                args.tasks,
            )
            rows_now, size_now = run_bytes()
            print(
                f"  and in PostgreSQL: {(size_now - size_tasks) / max(rows_now - rows_tasks, 1):,.0f} bytes each"
                f" ({rows_now - rows_tasks} ToolRun rows)"
            )
        print(
            f"\nA background run in PostgreSQL: {(size_after - size) / max(rows_after - rows, 1):,.0f} bytes each"
            f" ({rows_after - rows} ToolRun rows; table, indexes and TOAST; pages of 8 KiB)"
        )
        for session in clients:
            await session.close()
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--listens", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()
    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
