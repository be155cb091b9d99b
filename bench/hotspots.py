"""Where ours spends a tools/call: py-spy over one Daphne under load at c=16, grouped by library."""

from __future__ import annotations

import asyncio
import collections
import pstats
import shutil
from pathlib import Path

from load import Timing, op_echo
from loadgen import (
    PhaseResult,
    make_clients,
    run_phase,
)
from procs import (
    HOST,
    PYTHON,
    Affinity,
    daphne_server,
)

PROFILE_GROUPS = {
    "Redis client (redis-py)": "redis/",
    "Twisted HTTP (Daphne's server)": "twisted/",
    "  of which Content-Type parsing via the email package": "email/",
    "Channels routing/consumer": "channels/",
    "channels_redis": "channels_redis",
    "jsonschema": "jsonschema/",
    "json encode/decode": "json/",
    "Django": "django/",
    "psycopg": "psycopg",
    "socket writes (asyncio transport.write)": "selector_events.py:1057",
    "our code (mcp_app), inclusive": "mcp_app/",
}


def summarize_collapsed(path: Path, top: int = 20) -> list[str]:
    """Shares of py-spy samples per library and per function of ours, from raw (collapsed) output.

    A sample counts for a group when any frame of its stack is in it (inclusive). Stacks of
    asyncio tasks start at the task's coroutine, so "inclusive" is a lower bound for callers.
    """
    self_counts: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    groups: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [
            f
            for f in (f.strip() for f in stack.split(";"))
            if f and not f.startswith(("process ", "thread "))
        ]
        if not frames:
            continue
        self_counts[frames[-1]] += count
        for label, needle in PROFILE_GROUPS.items():
            if any(needle in f for f in frames):
                groups[label] += count
        for frame in {f for f in frames if "mcp_app/" in f}:
            ours[frame] += count
    if not total:
        return ["no samples"]
    lines = [
        f"{total} samples of active time (py-spy, every thread)",
        "",
        "share  library / part (inclusive)",
    ]
    lines += [f"{100 * groups[label] / total:5.1f}  {label}" for label in PROFILE_GROUPS]
    lines += ["", "self %  function (top)"]
    lines += [f"{100 * n / total:5.1f}  {name}" for name, n in self_counts.most_common(top)]
    lines += ["", "incl %  function of ours"]
    lines += [f"{100 * n / total:5.1f}  {name}" for name, n in ours.most_common(top)]
    return lines


def profile_ours(env: dict[str, str], affinity: Affinity, timing: Timing, wire: str = "legacy") -> None:
    """Sample ours with py-spy (cProfile if py-spy is missing) under tools/call c=16; print hot spots.

    Also prints the latency distribution of the sampled window, slowest first, to see the tail.
    """
    pyspy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    use_pyspy = Path(pyspy).exists()
    out = Path("/tmp/mcp-bench-ours.prof")
    raw = Path("/tmp/mcp-bench-ours.pyspy.txt")
    server = daphne_server(env, affinity.server, label="profile", profile=None if use_pyspy else out)
    server.start()
    seconds = max(4.0, timing.duration)
    try:

        async def go() -> PhaseResult:
            await server.wait_ready(wire)
            clients = await make_clients(16, HOST, server.port, server.path, wire=wire)
            await asyncio.gather(*(c.call_echo("warm") for c in clients))
            sampler = None
            if use_pyspy:
                sampler = await asyncio.create_subprocess_exec(
                    pyspy,
                    "record",
                    "--format",
                    "raw",
                    "--threads",
                    "--nonblocking",
                    "-r",
                    "200",
                    "-d",
                    str(int(seconds)),
                    "-o",
                    str(raw),
                    "-p",
                    str(server.pid),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
            r = await run_phase("profile", clients, op_echo, seconds, 0.5, server_pid=server.pid)
            if sampler is not None:
                _, err = await asyncio.wait_for(sampler.communicate(), 30)
                if sampler.returncode != 0:
                    print("py-spy failed:", err.decode(errors="replace")[-500:])
            await asyncio.gather(*(c.delete_session() for c in clients), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in clients))
            return r

        r = asyncio.run(go())
        print(
            f"(while sampled, {wire} wire: {r.rps:,.0f} req/s, p50 {r.pct(0.5):.2f} ms, p99 {r.pct(0.99):.2f} ms, "
            f"p99.9 {r.pct(0.999):.2f} ms, max {r.pct(1.0):.2f} ms, server CPU {100 * (r.server_cpu or 0):.0f}%)"
        )
    finally:
        server.stop(sig_int=True)
    if use_pyspy and raw.exists():
        print("\n".join(summarize_collapsed(raw)))
        print(f"(raw collapsed stacks: {raw}; render with any flame graph tool)")
    elif out.exists():
        stats = pstats.Stats(str(out))
        stats.sort_stats("tottime").print_stats(25)
    else:
        print("no profile written:", server.tail())
