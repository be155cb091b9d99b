"""`tools/call echo` through `federation.call_tool` against the SDK client calling the same upstream directly.

    .venv/bin/python bench/upstream.py [--quick] [--duration S]
    .venv/bin/python bench/run.py --only-upstream [--quick]

Prints figures; it is not a test; needs no database or Redis. The upstream is the SDK's reference
server (bench/reference_server.py, uvicorn, one process pinned to the first core); this process (both
clients, one at a time) runs on the other core(s). Per era, two ways to make the same call:
- direct: one `mcp.Client` (mode "auto" against the stateless server, which speaks 2026-07-28; mode
  "legacy" against the stateful one, one session), `client.call_tool("echo", ...)`, kept open for
  the whole phase. This is the baseline, measured in the same run.
- federation: `federation.call_tool(target, "echo", ...)`: the SSRF guard, the pool (one kept
  connection), the breaker, the error funnel, the per-call context, on top of the same SDK client.
c=1 is one caller in a closed loop; c=16 is 16 callers sharing the one client/connection (as
federation shares one per pool key). Slices alternate direct / federation, reversed every other round.
Prints p50, p99, calls/s and this process's CPU per call per phase (the client side's own cost, which
the upstream's latency hides), the added p50 at c=1 and the throughput ratio at c=16. Note that the
direct client's `call_tool` also validates the result against the tool's output schema, which
federation leaves to its caller (the pinned schema: AMB-160).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
# The reference server listens on 127.0.0.1, which the SSRF guard admits only when allow-listed.
os.environ["MCP_HTTP_HANDLER_ALLOW"] = "127.0.0.1"

import django  # noqa: E402

django.setup()

from mcp import Client  # noqa: E402
from procs import hold_bench_lock, log, plan_affinity, reference_server  # noqa: E402

from mcp_app import federation  # noqa: E402

Call = Callable[[], Awaitable[None]]


async def drive(call: Call, concurrency: int, seconds: float, cpu: list[float] | None = None) -> list[float]:
    """Run ``concurrency`` closed-loop callers of ``call`` for ``seconds``; return each call's seconds.

    ``cpu`` gets this process's CPU seconds over the slice (the client side only: the upstream is
    another process)."""
    latencies: list[float] = []
    cpu_began = time.process_time()
    stop = time.monotonic() + seconds

    async def caller() -> None:
        while time.monotonic() < stop:
            began = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    if cpu is not None:
        cpu.append(time.process_time() - cpu_began)
    return latencies


def summary(latencies: list[float], seconds: float, cpu: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000,
        "rps": len(ordered) / seconds,
        "cpu_ms": cpu / len(ordered) * 1000,
    }


async def measure_era(url: str, mode: str, slice_s: float, warmup: float, rounds: int) -> dict[str, dict]:
    target = federation.Target(tenant_id=1, upstream_id=1, url=url, mode=mode, timeout_seconds=30)
    async with Client(url, mode=mode, cache=None) as direct:
        counter = 0

        async def via_direct() -> None:
            nonlocal counter
            counter += 1
            message = f"m{counter}"
            result = await direct.session.call_tool("echo", {"message": message})
            assert result.structured_content == {"echo": message}, result

        async def via_federation() -> None:
            nonlocal counter
            counter += 1
            message = f"m{counter}"
            result = await federation.call_tool(target, "echo", {"message": message})
            assert result["structuredContent"] == {"echo": message}, result

        ways = {"direct": via_direct, "federation": via_federation}
        out: dict[str, dict] = {}
        for concurrency in (1, 16):
            samples: dict[str, list[float]] = {"direct": [], "federation": []}
            cpu: dict[str, list[float]] = {"direct": [], "federation": []}
            for call in ways.values():
                await drive(call, concurrency, warmup)
            for r in range(rounds):
                order = list(ways) if r % 2 == 0 else list(reversed(ways))
                for name in order:
                    samples[name] += await drive(ways[name], concurrency, slice_s, cpu[name])
            for name in ways:
                out[f"{name} c{concurrency}"] = summary(samples[name], slice_s * rounds, sum(cpu[name]))
        await federation.close_all()
        return out


def print_table(era: str, figures: dict[str, dict]) -> None:
    print(f"### {era}")
    print()
    print("| phase | p50 ms | p99 ms | calls/s | client CPU ms/call |")
    print("|---|---:|---:|---:|---:|")
    for phase, f in figures.items():
        print(f"| {phase} | {f['p50_ms']:.2f} | {f['p99_ms']:.2f} | {f['rps']:.0f} | {f['cpu_ms']:.2f} |")
    c1d, c1f = figures["direct c1"], figures["federation c1"]
    c16d, c16f = figures["direct c16"], figures["federation c16"]
    print()
    print(
        f"added p50 at c=1: {c1f['p50_ms'] - c1d['p50_ms']:+.2f} ms ({c1f['p50_ms'] / c1d['p50_ms']:.2f}x direct); "
        f"throughput at c=16: {c16f['rps'] / c16d['rps']:.2f}x direct (p50 {c16f['p50_ms'] / c16d['p50_ms']:.2f}x); "
        f"client CPU per call at c=1: {c1f['cpu_ms'] - c1d['cpu_ms']:+.2f} ms ({c1f['cpu_ms'] / c1d['cpu_ms']:.2f}x)"
    )
    print()


def run(quick: bool, duration: float | None) -> None:
    """Measure both eras and print their tables."""
    slice_s = duration or (2.0 if quick else 5.0)
    warmup = 0.5 if quick else 1.0
    rounds = 1 if quick else 2
    affinity = plan_affinity()
    print(f"pinning: {affinity.note}")
    print(
        f"phases: {slice_s:g}s per slice, {rounds} slice(s) per way after a {warmup:g}s warm-up; closed loop"
    )
    print()
    for era, stateless, mode in (("2026-07-28 (stateless upstream, mode auto)", True, "auto"),
                                 ("legacy (stateful upstream, mode legacy: one session)", False, "legacy")):  # fmt: skip
        server = reference_server(json_response=False, cores=affinity.server, stateless=stateless)
        server.start()
        try:
            asyncio.run(server.wait_ready("legacy"))
            log(f"upstream: {era}")
            figures = asyncio.run(
                measure_era(f"http://127.0.0.1:{server.port}/mcp", mode, slice_s, warmup, rounds)
            )
        finally:
            server.stop()
        print_table(era, figures)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short phases, for a smoke run")
    parser.add_argument("--duration", type=float, help="seconds per measured slice")
    args = parser.parse_args()
    lock = hold_bench_lock()  # noqa: F841 - held until the process exits
    run(args.quick, args.duration)


if __name__ == "__main__":
    main()
