"""The 2026-07-28 ("modern") wire: stateless POSTs against the SDK's stateless server and our own
legacy wire, server/discover and tools/list, Daphne vs uvicorn, and subscriptions/listen streams."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib.util
from dataclasses import dataclass

from load import Timing, fmt_ratio, load_row, op_echo, op_list
from loadgen import (
    MODERN_VERSION,
    ListenStream,
    McpClient,
    ModernClient,
    PhaseResult,
    make_clients,
    merge,
    proc_rss_kib,
    run_phase,
)
from procs import (
    HOST,
    Affinity,
    Server,
    daphne_server,
    log,
    reference_server,
    running,
    uvicorn_ours,
)
from streams import LIST_CHANGED, OPEN_PARALLEL, HeldStreams, hold_streams, print_held


@dataclass
class Target:
    """One server driven on one wire: a column of the modern tables."""

    key: str
    label: str
    server: Server
    wire: str


async def op_discover(client: McpClient, n: int) -> None:
    await client.discover()


MODERN_CONCURRENCIES = (1, 16, 64)


MODERN_LABELS = {
    "ours-modern": "ours (Daphne), modern",
    "ref-stateless": "SDK stateless json_response, modern",
    "ours-legacy": "ours (Daphne), legacy session",
    "ours-uvicorn": "ours (uvicorn+uvloop+httptools), modern",
}


# (phase, op, concurrency, targets): each phase's targets alternate slice by slice.
MODERN_PHASES = [
    *(
        (
            f"tools/call c={c}",
            op_echo,
            c,
            ("ours-modern", "ref-stateless", "ours-legacy") + (("ours-uvicorn",) if c == 16 else ()),
        )
        for c in MODERN_CONCURRENCIES
    ),
    ("server/discover c=16", op_discover, 16, ("ours-modern", "ref-stateless")),
    ("tools/list c=16", op_list, 16, ("ours-modern", "ref-stateless", "ours-legacy")),
]


# (phase, numerator, phase of the denominator, denominator): the ratios printed.
MODERN_RATIOS = [
    *(
        (f"tools/call c={c}", "ours-modern", f"tools/call c={c}", den)
        for c in MODERN_CONCURRENCIES
        for den in ("ref-stateless", "ours-legacy")
    ),
    ("tools/call c=16", "ours-uvicorn", "tools/call c=16", "ours-modern"),
    ("server/discover c=16", "ours-modern", "tools/list c=16", "ours-legacy"),
    ("server/discover c=16", "ours-modern", "server/discover c=16", "ref-stateless"),
    ("tools/list c=16", "ours-modern", "tools/list c=16", "ours-legacy"),
    ("tools/list c=16", "ours-modern", "tools/list c=16", "ref-stateless"),
]


ModernResults = dict[str, dict[str, PhaseResult]]


def uvloop_missing() -> str | None:
    """Why ours cannot run on uvicorn with uvloop and httptools here (None: it can)."""
    missing = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is None]
    return (
        f"{' and '.join(missing)} not installed (.venv/bin/pip install uvloop httptools)" if missing else None
    )


async def drive_modern(targets: list[Target], timing: Timing, rounds: int) -> ModernResults:
    """Every modern phase on its targets, one target loaded at a time, slices alternating."""
    by_key = {t.key: t for t in targets}
    clients: dict[str, list[McpClient]] = {}
    for t in targets:
        await t.server.wait_ready(t.wire)
    for t in targets:
        clients[t.key] = await make_clients(
            max(MODERN_CONCURRENCIES), HOST, t.server.port, t.server.path, wire=t.wire
        )
        # Warm every path once before measuring (imports, caches, lazy initialisation).
        await asyncio.gather(*(c.call_echo("warm") for c in clients[t.key]))
        await asyncio.gather(*(c.list_tools() for c in clients[t.key][:16]))
        if t.wire == "modern":
            await asyncio.gather(*(c.discover() for c in clients[t.key][:16]))
    raw: dict[str, dict[str, list[PhaseResult]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    try:
        for name, op, conc, keys in MODERN_PHASES:
            present = [k for k in keys if k in by_key]
            for rnd in range(rounds):
                for key in present if rnd % 2 == 0 else present[::-1]:
                    log(f"modern: {key}: {name} (round {rnd + 1}/{rounds})")
                    raw[key][name].append(
                        await run_phase(
                            name,
                            clients[key][:conc],
                            op,
                            timing.duration / rounds,
                            timing.warmup,
                            server_pid=by_key[key].server.pid,
                        )
                    )
    finally:
        for cs in clients.values():
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {key: {name: merge(rs) for name, rs in phases.items()} for key, phases in raw.items()}


def print_modern(results: ModernResults, notes: list[str]) -> list[str]:
    lines = [
        "| workload | server, wire | req/s | p50 ms | p99 ms | errors | server CPU | loadgen CPU | other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, _, _, keys in MODERN_PHASES:
        for key in keys:
            r = results.get(key, {}).get(name)
            if r is not None:
                lines.append(load_row(name, MODERN_LABELS[key], r))
    lines += [
        "",
        "| ratio | throughput | p50 | p99 |",
        "|---|---:|---:|---:|",
    ]
    for num_phase, num, den_phase, den in MODERN_RATIOS:
        a, b = results.get(num, {}).get(num_phase), results.get(den, {}).get(den_phase)
        if a is None or b is None:
            continue
        what = (
            f"{num_phase}: {MODERN_LABELS[num]} / {MODERN_LABELS[den]}"
            if num_phase == den_phase
            else f"{num_phase} ({MODERN_LABELS[num]}) / {den_phase} ({MODERN_LABELS[den]})"
        )
        lines.append(
            f"| {what} | {fmt_ratio(a.rps, b.rps)} | {fmt_ratio(a.pct(0.5), b.pct(0.5))} | "
            f"{fmt_ratio(a.pct(0.99), b.pct(0.99))} |"
        )
    lines += [f"- {note}" for note in notes]
    for line in lines:
        print(line)
    for key, phases in results.items():
        for name, r in phases.items():
            for err, count in r.errors.most_common(5):
                print(f"  ERROR {key} {name}: {count} x {err}")
    return lines


# A real edit: the demo echo's description gets a new suffix (replacing the last run's), committed.
# Prints the wall-clock time save() returned so delivery is timed from there.
MODERN_TRIGGER = (
    "import time; from mcp_app.models import Tool; "
    "t = Tool.objects.get(tenant__slug='demo', name='echo'); "
    "t.description = t.description.split(' [bench edit')[0] + f' [bench edit {time.time():.0f}]'; "
    "t.save(); print('SAVED', time.time())"
)


@dataclass
class ListenResult:
    rss_start_kib: int  # server VmRSS after warm-up
    held: HeldStreams


async def listen_bench(server: Server, env: dict[str, str], n: int, wait_seconds: float) -> ListenResult:
    """Hold `n` subscriptions/listen streams on one process; time an edit's list_changed to all."""
    await server.wait_ready("modern")
    warm = ModernClient(HOST, server.port, server.path)
    await warm.call_echo("warm")
    await warm.list_tools()
    await warm.close()
    first = ListenStream(HOST, server.port, server.path)
    await first.open()  # warms the listen path (channel layer, group join)
    await first.close()
    await asyncio.sleep(1.0)
    rss0 = proc_rss_kib(server.pid) or 0
    log(f"listen: opening {n} subscriptions/listen streams")
    streams = [
        ListenStream(HOST, server.port, server.path, request_id=i + 1, want_method=LIST_CHANGED)
        for i in range(n)
    ]
    held = await hold_streams(
        server,
        env,
        streams,
        MODERN_TRIGGER,
        wait_seconds,
        "listen",
        "editing a tool description in a subprocess",
    )
    return ListenResult(rss_start_kib=rss0, held=held)


def print_listen(r: ListenResult) -> list[str]:
    h, d = r.held, r.held.delivery
    per_stream = (h.rss_streams_kib - r.rss_start_kib) / max(1, h.opened)
    first = "n/a" if d.first_ms is None else f"{d.first_ms:.0f} ms"
    last = "n/a" if d.last_ms is None else f"{d.last_ms:.0f} ms"
    lines = [
        f"- streams requested / opened (acknowledged): {h.streams} / {h.opened}, in {h.open_seconds:.1f}s "
        f"({OPEN_PARALLEL} opening at a time)",
        f"- server RSS: after warm-up {r.rss_start_kib / 1024:.1f} MiB, with the streams open "
        f"{h.rss_streams_kib / 1024:.1f} MiB -> {per_stream:.1f} KiB per open stream",
        f"- notifications/tools/list_changed delivered to {d.delivered} / {h.opened} streams "
        f"(after save() returned: first {first}, last {last})",
        "- trigger: the demo echo's description changed with the ORM (Tool.save()) in a `manage.py shell` "
        f"subprocess, same DATABASE_URL/REDIS_URL ({d.trigger_seconds:.1f}s incl. Django start)",
    ]
    return print_held(lines, h, "listen")


def print_modern_section(
    env: dict[str, str], affinity: Affinity, quick: bool, duration: float | None, listens: int
) -> ModernResults:
    """The modern wire's phases: one run, every server started, loaded one at a time."""
    timing = Timing(warmup=0.3, duration=2.0) if quick else Timing(warmup=0.5, duration=8.0)
    rounds = 1 if quick else 2
    if duration:
        timing.duration = duration
    notes = []
    daphne = daphne_server(env, affinity.server, label="modern")
    servers = [daphne, reference_server(True, affinity.server, stateless=True)]
    targets = [
        Target("ours-modern", MODERN_LABELS["ours-modern"], daphne, "modern"),
        Target("ref-stateless", MODERN_LABELS["ref-stateless"], servers[1], "modern"),
        Target("ours-legacy", MODERN_LABELS["ours-legacy"], daphne, "legacy"),
    ]
    why_not = uvloop_missing()
    if why_not is None:
        servers.append(uvicorn_ours(env, affinity.server))
        targets.append(Target("ours-uvicorn", MODERN_LABELS["ours-uvicorn"], servers[2], "modern"))
    else:
        notes.append(f"ours on uvicorn skipped: {why_not}")
    print(
        f"## MCP {MODERN_VERSION} wire: ours vs the SDK's stateless server, vs our legacy wire, Daphne vs uvicorn"
    )
    print()
    print(
        f"{timing.duration:g}s measured per phase and target, in {rounds} slice(s) each after a "
        f"{timing.warmup:g}s warm-up; closed loop; one keep-alive connection per client. Modern: one POST per "
        f"request with the _meta envelope and MCP-Protocol-Version/Mcp-Method/Mcp-Name, no initialize, no "
        "session; every answer checked (200, resultType complete, echo echoed). Legacy: protocol 2025-06-18, "
        "one session per client, on the same Daphne process as ours-modern. SDK: MCPServer, "
        "streamable_http_app(json_response=True, stateless_http=True), uvicorn (asyncio, h11). Ours on "
        "uvicorn: the same mcpsite.asgi:application, --loop uvloop --http httptools, 1 process. All "
        "servers pinned to the server core and up at once; one loaded at a time, slices alternate "
        "(order reversed every other round)."
    )
    print()
    with contextlib.ExitStack() as stack:
        for server in servers:
            log(f"{server.label}: starting")
            stack.enter_context(running(server))
        results = asyncio.run(drive_modern(targets, timing, rounds))
    print_modern(results, notes)
    print()
    print(f"## {listens} subscriptions/listen streams on one Daphne process")
    print()
    server = daphne_server(env, affinity.server, label="listen")
    with running(server):
        lres = asyncio.run(listen_bench(server, env, listens, 10.0 if quick else 20.0))
    print_listen(lres)
    return results
