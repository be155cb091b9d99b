"""Session admission (AMB-100..103): an `initialize` refused at the per-client cap against an accepted one.

`run.py --only-sessions`. One Daphne (--proxy-headers, so X-Forwarded-For names each simulated
client), PostgreSQL and Redis, `MCP_SESSIONS_PER_CLIENT=20`. Accepted: every `initialize` comes from
an address never seen before, so each is admitted (the admission script) and its session stored.
Refused: every `initialize` comes from one address already holding its 20 sessions, so each is
answered 429 by the same script. Both at the same concurrency on keep-alive connections, slices
alternating; the figure is refused / accepted in server CPU per request and in p50 latency (goal:
at most 1.0x: refusing a flood must not cost the server more than serving it).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import Any

from loadgen import BenchError, McpClient, PhaseResult, merge, run_phase
from procs import HOST, Affinity, daphne_server, log, running

CONCURRENCY = 8
PER_CLIENT = 20
FLOODER = "10.255.255.1"
PATH = "/t/demo/mcp"
INITIALIZE = {
    "jsonrpc": "2.0",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}

_addresses = (f"10.{a}.{b}.{c}" for a, b, c in itertools.product(range(200), range(256), range(1, 255)))


async def initialize(client: McpClient, n: int, address: str) -> Any:
    return await client.post({**INITIALIZE, "id": n}, headers={"X-Forwarded-For": address})


async def op_accepted(client: McpClient, n: int) -> None:
    response = await initialize(client, n, next(_addresses))
    if response.status != 200 or not isinstance(response.message, dict) or "result" not in response.message:
        raise BenchError(f"accepted initialize: HTTP {response.status}")


async def op_refused(client: McpClient, n: int) -> None:
    response = await initialize(client, n, FLOODER)
    error = (response.message or {}).get("error") if isinstance(response.message, dict) else None
    if response.status != 429 or not error or error.get("data", {}).get("sessions") != "client":
        raise BenchError(f"refused initialize: HTTP {response.status}")


async def drive(port: int, pid: int, duration: float, warmup: float, slices: int) -> dict[str, PhaseResult]:
    filler = McpClient(HOST, port, PATH)
    try:
        for n in range(PER_CLIENT):  # the flooder's whole share
            response = await initialize(filler, n, FLOODER)
            if response.status != 200:
                raise SystemExit(f"could not open the flooder's sessions: HTTP {response.status}")
    finally:
        await filler.close()
    clients = {
        key: [McpClient(HOST, port, PATH) for _ in range(CONCURRENCY)] for key in ("accepted", "refused")
    }
    ops = {"accepted": op_accepted, "refused": op_refused}
    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    keys = list(ops)
    try:
        for rnd in range(slices):
            for key in keys if rnd % 2 == 0 else keys[::-1]:
                log(f"sessions bench: {key} (slice {rnd + 1}/{slices})")
                raw[key].append(
                    await run_phase(
                        f"initialize c={CONCURRENCY}", clients[key], ops[key], duration / slices, warmup, pid
                    )
                )
    finally:
        for cs in clients.values():
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {key: merge(rs) for key, rs in raw.items()}


def cpu_ms(r: PhaseResult) -> float:
    return (r.server_cpu or 0.0) / r.rps * 1000 if r.rps else float("nan")


def print_sessions_section(
    env: dict[str, str], affinity: Affinity, duration: float, warmup: float, slices: int
) -> None:
    print(f"## Sessions: initialize refused at the per-client cap vs accepted, c={CONCURRENCY}")
    print()
    print(
        f"one Daphne process (--proxy-headers), MCP_SESSIONS_PER_CLIENT={PER_CLIENT}; accepted: a new address "
        f"every initialize; refused: one address holding its {PER_CLIENT}; slices alternate"
    )
    print()
    server_env = dict(env, MCP_SESSIONS_PER_CLIENT=str(PER_CLIENT), MCP_SESSION_FIRST_IDLE_SECONDS="3600")
    server = daphne_server(server_env, affinity.server, label="ours-sessions")
    server.cmd.insert(server.cmd.index("-b"), "--proxy-headers")
    with running(server):
        results = asyncio.run(_ready_and_drive(server, duration, warmup, slices))
    print("| initialize | req/s | p50 ms | p99 ms | server CPU ms / request | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for key, r in results.items():
        print(
            f"| {key} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {cpu_ms(r):.3f} | "
            f"{sum(r.errors.values())} |"
        )
    accepted, refused = results["accepted"], results["refused"]
    cpu_ratio = cpu_ms(refused) / cpu_ms(accepted)
    p50_ratio = refused.pct(0.5) / accepted.pct(0.5)
    verdict = "MET" if cpu_ratio <= 1.0 else "NOT MET"
    print()
    print(
        f"- refused/accepted: server CPU per request {cpu_ratio:.2f}x, p50 {p50_ratio:.2f}x, "
        f"throughput {refused.rps / accepted.rps:.2f}x -> {verdict} (goal: CPU per request <= 1.0x)"
    )
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")


async def _ready_and_drive(
    server: Any, duration: float, warmup: float, slices: int
) -> dict[str, PhaseResult]:
    await server.wait_ready()
    return await drive(server.port, server.pid, duration, warmup, slices)
