"""The load phases against ours and the SDK's servers side by side (tools/call of echo at c=1, 16, 64;
tools/list), and the tables that print them: the throughput and latency figures of bench/run.py."""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from typing import Any

from loadgen import (  # noqa: E402
    McpClient,
    PhaseResult,
    make_clients,
    merge,
    run_phase,
)
from procs import (  # noqa: E402
    HOST,
    Server,
    log,
)

CONCURRENCIES = (1, 16, 64)
LIST_CONCURRENCY = 16


@dataclass
class Timing:
    warmup: float
    duration: float


async def op_echo(client: McpClient, n: int) -> None:
    await client.call_echo(f"hello {n}")


async def op_list(client: McpClient, n: int) -> None:
    await client.list_tools()


PHASES = [(f"tools/call c={c}", op_echo, c) for c in CONCURRENCIES] + [
    (f"tools/list c={LIST_CONCURRENCY}", op_list, LIST_CONCURRENCY)
]


async def drive(servers: list[Server], timing: Timing, rounds: int) -> dict[str, dict[str, PhaseResult]]:
    """Run every load phase against every server, one server at a time, interleaved in rounds.

    All servers stay up but only one is loaded at any moment; each phase is split into
    `rounds` slices that alternate between the servers (in alternating order), so drift in
    background load on the machine hits every server alike.
    """
    clients: dict[str, list[McpClient]] = {}
    for server in servers:
        await server.wait_ready()
        clients[server.label] = await make_clients(max(CONCURRENCIES), HOST, server.port, server.path)
        # Warm every path once before measuring (imports, caches, lazy initialisation).
        await asyncio.gather(*(c.call_echo("warm") for c in clients[server.label]))
        await asyncio.gather(*(c.list_tools() for c in clients[server.label][:LIST_CONCURRENCY]))
    raw: dict[str, dict[str, list[PhaseResult]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    try:
        for name, op, conc in PHASES:
            for rnd in range(rounds):
                order = servers if rnd % 2 == 0 else list(reversed(servers))
                for server in order:
                    log(f"{server.label}: {name} (round {rnd + 1}/{rounds})")
                    raw[server.label][name].append(
                        await run_phase(
                            name,
                            clients[server.label][:conc],
                            op,
                            timing.duration / rounds,
                            timing.warmup,
                            server_pid=server.pid,
                        )
                    )
    finally:
        for server in servers:
            cs = clients.get(server.label, [])
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {label: {name: merge(rs) for name, rs in phases.items()} for label, phases in raw.items()}


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def load_row(workload: str, server: str, r: PhaseResult) -> str:
    """One row of a load table (the legacy comparison and the 2026-07-28 one share the columns)."""
    srv = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
    oth = f"{r.other_cpu * 100:.0f}%" if r.other_cpu is not None else "?"
    return (
        f"| {workload} | {server} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | "
        f"{sum(r.errors.values())} | {srv} | {r.loadgen_cpu * 100:.0f}% | {oth} |"
    )


def print_load_table(results: dict[str, dict[str, PhaseResult]]) -> list[str]:
    """Print one row per (phase, server) and the ratios; return markdown lines."""
    labels = {"ours": "ours (Daphne)", "ref-sse": "SDK default (SSE)", "ref-json": "SDK json_response"}
    lines = [
        "| workload | server | req/s | p50 ms | p99 ms | errors | server CPU | loadgen CPU | other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    phases = list(next(iter(results.values())).keys()) if results else []
    for phase in phases:
        for key, label in labels.items():
            r = results.get(key, {}).get(phase)
            if r is not None:
                lines.append(load_row(phase, label, r))
    ratio_lines = []
    if "ours" in results:
        ratio_lines += [
            "",
            "| workload | vs | throughput ours/ref | p50 ours/ref | p99 ours/ref |",
            "|---|---|---:|---:|---:|",
        ]
        for phase in phases:
            ours = results["ours"].get(phase)
            for key in ("ref-sse", "ref-json"):
                ref = results.get(key, {}).get(phase)
                if ours is None or ref is None:
                    continue
                ratio_lines.append(
                    f"| {phase} | {labels[key]} | {fmt_ratio(ours.rps, ref.rps)} | "
                    f"{fmt_ratio(ours.pct(0.5), ref.pct(0.5))} | {fmt_ratio(ours.pct(0.99), ref.pct(0.99))} |"
                )
    for line in lines + ratio_lines:
        print(line)
    return lines + ratio_lines


def print_goal(results: dict[str, dict[str, PhaseResult]]) -> list[str]:
    phase = "tools/call c=16"
    ours = results.get("ours", {}).get(phase)
    lines = []
    for key, label in (("ref-sse", "reference default (SSE)"), ("ref-json", "reference json_response")):
        ref = results.get(key, {}).get(phase)
        if ours is None or ref is None:
            continue
        tput, p99 = ours.rps / ref.rps, ours.pct(0.99) / ref.pct(0.99)
        verdict = "MET" if tput >= 1.0 and p99 <= 1.0 else "NOT MET"
        goal = " (goal: throughput >= 1.0x and p99 <= 1.0x)" if key == "ref-sse" else " (for information)"
        lines.append(f"- c=16 vs {label}: throughput {tput:.2f}x, p99 {p99:.2f}x -> {verdict}{goal}")
    for line in lines:
        print(line)
    return lines


def print_errors(results: dict[str, dict[str, PhaseResult]]) -> None:
    for key, phases in results.items():
        for phase, r in phases.items():
            for err, count in r.errors.most_common(5):
                print(f"  ERROR {key} {phase}: {count} x {err}")


def figures(results: dict[str, dict[str, PhaseResult]]) -> dict[str, Any]:
    """The throughput figures as plain data, for --json."""
    return {
        k: {
            p: {"rps": r.rps, "p50_ms": r.pct(0.5), "p99_ms": r.pct(0.99), "errors": dict(r.errors)}
            for p, r in v.items()
        }
        for k, v in results.items()
    }
