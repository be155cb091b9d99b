"""Another tenant's latency while one tenant renders a hostile template (issue 20, AMB-98).

    .venv/bin/python bench/hostile_template.py [--pairs 5] [--slice 6] [--attackers 2]

Prints figures; it is not a test. One Daphne process on a scratch PostgreSQL database (DATABASE_URL's
server) and Redis (REDIS_URL), seeded with the demo tenant; a second tenant, `hostile`, has the issue's
template tool (four nested `{% for %}` over `"x"|ljust:50`: 6.25 million characters, 17.5 s on the
event loop before this change) with a 3-second timeout. The demo tenant's `echo` is called one at a
time on the 2026-07-28 wire (a keep-alive connection, as `run.py`'s clients). Slices alternate: `idle`
(echo alone) and `hostile` (echo while `--attackers` legacy sessions call the hostile tool back to
back); each pair gives the ratio hostile/idle of echo's p50 and p99, so a noisy machine shifts both
sides of a pair alike. Goal: p50 within 2x idle. Also printed: how long each hostile call took (its
timeout is 3 s) and how many ended with the expected error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import BenchError, McpClient, ModernClient  # noqa: E402
from procs import (  # noqa: E402
    HOST,
    PYTHON,
    daphne_server,
    hold_bench_lock,
    log,
    prepare_database,
    run_checked,
    running,
    with_db_name,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/mcp_bench_hostile"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/2"
NESTED_LOOPS = (
    '{% for a in "x"|ljust:50 %}{% for b in "x"|ljust:50 %}{% for c in "x"|ljust:50 %}'
    '{% for d in "x"|ljust:50 %}x{% endfor %}{% endfor %}{% endfor %}{% endfor %}'
)
HOSTILE_TIMEOUT = 3


def add_hostile_tenant(env: dict[str, str]) -> None:
    code = (
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "t = Tenant.objects.create(slug='hostile', name='hostile', auth_mode='public')\n"
        f"Tool.objects.create(tenant=t, name='loops', handler='template', handler_config={{'text': {NESTED_LOOPS!r}}},"
        f" timeout_seconds={HOSTILE_TIMEOUT})\n"
    )
    run_checked([PYTHON, "manage.py", "shell", "-c", code], env, "the hostile tenant")


async def echo_latencies(port: int, seconds: float) -> list[float]:
    client = ModernClient(HOST, port, "/t/demo/mcp")
    taken: list[float] = []
    try:
        await client.call_echo("warm")
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await client.call_echo(f"m{n}")
            taken.append(time.perf_counter() - started)
            n += 1
    finally:
        await client.close()
    return taken


async def attack(port: int, stop: asyncio.Event, ends: list[tuple[float, bool]]) -> None:
    client = McpClient(HOST, port, "/t/hostile/mcp")
    try:
        await client.initialize()
        while not stop.is_set():
            started = time.perf_counter()
            result = await client.request("tools/call", {"name": "loops", "arguments": {}})
            ends.append((time.perf_counter() - started, bool(result.get("isError"))))
    finally:
        await client.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(port: int, pairs: int, slice_seconds: float, attackers: int) -> None:
    rows: list[tuple[float, float, float, float]] = []
    ends: list[tuple[float, bool]] = []
    for i in range(pairs):
        idle = await echo_latencies(port, slice_seconds)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(attack(port, stop, ends)) for _ in range(attackers)]
        await asyncio.sleep(0.5)  # the hostile calls are rendering
        hostile = await echo_latencies(port, slice_seconds)
        stop.set()
        await asyncio.gather(*tasks)
        row = (pct(idle, 0.5), pct(idle, 0.99), pct(hostile, 0.5), pct(hostile, 0.99))
        rows.append(row)
        log(f"pair {i + 1}/{pairs}: idle p50 {row[0] * 1e3:.2f} ms, hostile p50 {row[2] * 1e3:.2f} ms")
    print(
        f"\necho on the demo tenant, one call at a time, while {attackers} sessions call the hostile template"
    )
    print(
        f"{'pair':>4} | {'idle p50':>9} {'idle p99':>9} | {'hostile p50':>11} {'hostile p99':>11} | {'p50 x':>6} {'p99 x':>6}"
    )
    for i, (ip50, ip99, hp50, hp99) in enumerate(rows, 1):
        print(
            f"{i:>4} | {ip50 * 1e3:>7.2f}ms {ip99 * 1e3:>7.2f}ms | {hp50 * 1e3:>9.2f}ms {hp99 * 1e3:>9.2f}ms"
            f" | {hp50 / ip50:>5.2f}x {hp99 / ip99:>5.2f}x"
        )
    p50x = statistics.median(r[2] / r[0] for r in rows)
    p99x = statistics.median(r[3] / r[1] for r in rows)
    print(f"median of pairs: p50 {p50x:.2f}x, p99 {p99x:.2f}x  (goal: p50 within 2x idle)")
    took = [t for t, _ in ends]
    errors = sum(1 for _, is_error in ends if is_error)
    if took:
        print(
            f"hostile calls: {len(took)}, {errors} ended with an isError result; took median {statistics.median(took):.2f} s,"
            f" max {max(took):.2f} s (timeout {HOSTILE_TIMEOUT} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--slice", type=float, default=6.0, help="seconds of each slice")
    parser.add_argument("--attackers", type=int, default=2)
    args = parser.parse_args()
    lock = hold_bench_lock()
    database_url = with_db_name(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), "mcp_bench_hostile")
    env = prepare_database(database_url, os.environ.get("REDIS_URL", DEFAULT_REDIS_URL))
    add_hostile_tenant(env)
    server = daphne_server(env, None)
    with running(server):
        asyncio.run(server.wait_ready("modern"))
        try:
            asyncio.run(measure(server.port, args.pairs, args.slice, args.attackers))
        except BenchError as exc:
            raise SystemExit(f"bench failed: {exc}\n{server.tail()}") from None
    del lock


if __name__ == "__main__":
    main()
