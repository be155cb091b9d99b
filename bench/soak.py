"""Soak (issue 13): two Daphne processes and a Celery worker under a steady mix, memory sampled all along.

    .venv/bin/python bench/soak.py                    # measure the maximum rate, then 10 minutes at 80% of it
    .venv/bin/python bench/soak.py --minutes 2        # a shorter soak
    .venv/bin/python bench/soak.py --seconds 35 --rate 40 --keep-database --no-lock --json out.json
                                                      # the CI version (tests/e2e/test_soak.py)

Starts two Daphne processes and one Celery worker (prefork, concurrency 2, its own queue) on PostgreSQL
and Redis (DATABASE_URL, REDIS_URL; the database is dropped and recreated unless --keep-database says
it is migrated and seeded already). Then, unless --rate is given, measures the maximum rate of the mix
(operations answered per second by a closed loop of --probe-concurrency clients) and soaks at
--fraction (80%) of it in an open loop: operations start on schedule whatever the answers do
(soak_mix.py says what an operation is and how each is counted). All along: `subscriptions/listen` and
legacy GET streams held open on both processes, one of each replaced every --churn-seconds; every
--edit-seconds a tool of the demo tenant is edited in another process and every held stream must be
told; the RSS of each Daphne process and of each worker process sampled every --sample-seconds.

Verdict: nothing lost (every operation answered), no duplicate response, no error, and the memory of
each process flat: the mean RSS of the last --window-seconds within --flat (10%) of the mean of the
first window after --warmup-seconds. Exit status 0 when all hold. Figures on stdout, progress on stderr,
server logs in /tmp/mcp-bench-soak-*.log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import proc_rss_kib  # noqa: E402
from procs import (  # noqa: E402
    PYTHON,
    ROOT,
    Server,
    celery_worker,
    daphne_server,
    django_env,
    hold_bench_lock,
    log,
    prepare_database,
    raise_fd_limit,
    wait_workers_ready,
    worker_node,
)
from soak_mix import LOST, Mix, Streams, closed_loop, open_loop  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/mcp_soak"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/2"
WORKER_POOL = ["--concurrency=2", "--without-gossip", "--without-mingle", "--without-heartbeat"]
EDITED_TOOL = "add"  # its description gains and loses a suffix; no operation of the mix calls it
EDIT = """
from mcp_app.models import Tool
tool = Tool.objects.get(tenant__slug="demo", name={name!r})
suffix = " (soak edit)"
tool.description = tool.description[: -len(suffix)] if tool.description.endswith(suffix) else tool.description + suffix
tool.save()
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default 10)")
    p.add_argument("--seconds", type=float, help="length of the soak in seconds (instead of --minutes)")
    p.add_argument("--rate", type=float, help="operations per second; skips measuring the maximum")
    p.add_argument("--fraction", type=float, default=0.8, help="of the measured maximum (default 0.8)")
    p.add_argument("--probe-seconds", type=float, default=20.0)
    p.add_argument("--probe-concurrency", type=int, default=48)
    p.add_argument("--warmup-seconds", type=float, help="default: 60, or a quarter of a shorter soak")
    p.add_argument(
        "--window-seconds", type=float, help="memory compared over (default 60, or less in a short soak)"
    )
    p.add_argument("--sample-seconds", type=float, default=2.0)
    p.add_argument("--streams", type=int, default=10, help="listen and GET streams held per server, each")
    p.add_argument("--churn-seconds", type=float, default=5.0)
    p.add_argument("--edit-seconds", type=float, default=120.0, help="0: never edit")
    p.add_argument("--flat", type=float, default=0.10, help="allowed RSS growth after warm-up (0.10 = 10%%)")
    p.add_argument(
        "--keep-database", action="store_true", help="DATABASE_URL is migrated and seeded: use it as is"
    )
    p.add_argument("--no-lock", action="store_true", help="do not wait on /tmp/mcp-bench.lock")
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args(argv)
    args.duration = args.seconds if args.seconds is not None else args.minutes * 60
    if args.warmup_seconds is None:
        args.warmup_seconds = min(60.0, args.duration / 4)
    if args.window_seconds is None:
        args.window_seconds = min(60.0, (args.duration - args.warmup_seconds) / 3)
    return args


# ---------------------------------------------------------------------------------------------
# Memory


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


@dataclass
class Memory:
    """RSS samples (VmRSS from /proc) of every Daphne and worker process, by label."""

    daphnes: list[Server]
    worker: Server
    samples: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # label: [(t, KiB)]

    def processes(self) -> dict[str, int]:
        found = {s.label: s.pid for s in self.daphnes}
        found["worker (main)"] = self.worker.pid
        for i, pid in enumerate(sorted(children(self.worker.pid)), 1):
            found[f"worker child {i}"] = pid
        return found

    def sample(self, t: float) -> None:
        for label, pid in self.processes().items():
            kib = proc_rss_kib(pid)
            if kib is not None:
                self.samples.setdefault(label, []).append((t, kib))

    def mean_mib(self, label: str, start: float, end: float) -> float | None:
        values = [kib for t, kib in self.samples.get(label, []) if start <= t < end]
        return statistics.fmean(values) / 1024 if values else None


async def every(seconds: float, action: Any) -> None:
    while True:
        await asyncio.sleep(seconds)
        await action()


# ---------------------------------------------------------------------------------------------
# The run


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    raise_fd_limit()
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    if args.keep_database:
        env = django_env(database_url, redis_url)
    else:
        log(f"soak: fresh database {database_url.rsplit('/', 1)[-1]}")
        env = prepare_database(database_url, redis_url)
    # A queue of the soak's own: no other worker on the same broker takes its background runs.
    env.update(MCP_BACKGROUND_QUEUE=f"mcp-soak-{secrets.token_hex(4)}", MCP_SHUTDOWN_GRACE_SECONDS="5")
    daphnes = [daphne_server(env, None, label=f"soak-{name}") for name in "AB"]
    worker = celery_worker(env, None, WORKER_POOL, label="soak-worker", queue=env["MCP_BACKGROUND_QUEUE"])
    for process in (*daphnes, worker):
        process.start()
    try:
        return await drive(args, env, daphnes, worker)
    finally:
        for process in (*daphnes, worker):
            process.stop()


async def edit_tool(env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        PYTHON, "manage.py", "shell", "-c", EDIT.format(name=EDITED_TOOL),
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"editing {EDITED_TOOL} failed: {err.decode()[-2000:]}")


async def drive(
    args: argparse.Namespace, env: dict[str, str], daphnes: list[Server], worker: Server
) -> dict[str, Any]:
    t_start = time.monotonic()
    await asyncio.gather(*(d.wait_ready() for d in daphnes))
    await asyncio.to_thread(wait_workers_ready, [worker], [worker_node(worker.label)])
    log(f"soak: two Daphne processes and a worker up in {time.monotonic() - t_start:.1f}s")
    mix = Mix(daphnes)
    await mix.open()
    for kind in mix.kinds:  # every path once (imports, catalog, the worker's first job)
        await mix.run(kind, asyncio.get_running_loop().time())
    report: dict[str, Any] = {
        "warm-up errors": {k: dict(t.errors) for k, t in mix.tallies.items() if t.errors}
    }
    if args.rate is None:
        await closed_loop(mix, args.probe_concurrency, 3.0)
        mix.reset()
        log(
            f"soak: measuring the maximum rate of the mix ({args.probe_seconds:.0f}s, {args.probe_concurrency} loops)"
        )
        peak, per_kind = await closed_loop(mix, args.probe_concurrency, args.probe_seconds)
        report["probe"] = {
            "max_rate": peak,
            "answered_per_second": per_kind,
            "errors": {k: dict(t.errors) for k, t in mix.tallies.items() if t.errors},
            "p99_ms": {k: pct(t.latencies, 0.99) for k, t in mix.tallies.items()},
        }
        rate = peak * args.fraction
        log(f"soak: maximum {peak:.0f} operations/s; soaking at {rate:.0f}/s")
    else:
        rate = args.rate
    mix.reset()
    streams = Streams(daphnes, args.streams)
    await streams.open()
    memory = Memory(daphnes, worker)
    edits = 0
    t0 = time.monotonic()
    windows: list[dict[str, Any]] = []
    last = (t0, mix.snapshot(), 0)

    async def sample() -> None:
        nonlocal last
        now = time.monotonic()
        memory.sample(now - t0)
        if now - last[0] >= args.window_seconds:
            snap = mix.snapshot()
            done = sum(ok for _s, ok, _e in snap.values()) - sum(ok for _s, ok, _e in last[1].values())
            errs = sum(e for _s, _o, e in snap.values()) - sum(e for _s, _o, e in last[1].values())
            windows.append(
                {
                    "t": now - t0,
                    "rate": done / (now - last[0]),
                    "errors": errs,
                    "in_flight": len(mix.in_flight),
                    "in_flight_by_kind": {name: sent - ok - e for name, (sent, ok, e) in snap.items()},
                    "p99_ms": pct(mix.latencies[last[2] :], 0.99),
                }
            )
            rss = ", ".join(f"{label} {s[-1][1] / 1024:.1f}" for label, s in memory.samples.items())
            log(
                f"soak: {now - t0:5.0f}s {done / (now - last[0]):6.1f} ops/s, p99 {fmt(windows[-1]['p99_ms'])} ms, "
                f"{errs} errors, in flight {windows[-1]['in_flight_by_kind']}, RSS MiB: {rss}"
            )
            last = (now, snap, len(mix.latencies))

    stop_editing = asyncio.Event()

    async def edit_every(seconds: float) -> None:
        # Not cancelled at the end of the run like the other loops: an edit under way is checked to
        # its end (a `manage.py shell` on a busy machine can take most of a short run), so a run
        # that started an edit always reports on it.
        nonlocal edits
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_editing.wait(), seconds)
            if stop_editing.is_set():
                return
            edits += 1
            await streams.check_edit(lambda: edit_tool(env))

    memory.sample(0.0)
    tasks = [
        asyncio.create_task(every(args.sample_seconds, sample)),
        asyncio.create_task(every(args.churn_seconds, streams.churn)),
    ]
    editing = asyncio.create_task(edit_every(args.edit_seconds)) if args.edit_seconds > 0 else None
    log(f"soak: {args.duration:.0f}s at {rate:.1f} operations/s")
    await open_loop(mix, rate, args.duration)
    seconds = time.monotonic() - t0
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if editing is not None:
        stop_editing.set()
        await editing
    memory.sample(seconds)
    backlog = await mix.drain()
    await streams.close()
    await mix.close()
    if edits % 2:  # leave the edited tool as it was
        await edit_tool(env)
    report.update(summarize(args, mix, streams, memory, rate, seconds, windows, edits, backlog))
    return report


# ---------------------------------------------------------------------------------------------
# Figures


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000


def summarize(
    args: argparse.Namespace, mix: Mix, streams: Streams, memory: Memory, rate: float, seconds: float,
    windows: list[dict[str, Any]], edits: int, backlog: int,
) -> dict[str, Any]:  # fmt: skip
    tallies = {
        **mix.tallies,
        **streams.tally,
        "held stream survived": streams.dropped,
        "told of an edit": streams.missed,
    }
    ops = {
        name: {
            "scheduled": t.scheduled or t.sent, "sent": t.sent, "ok": t.ok, "lost": t.lost, "wrong": t.wrong, "errors": dict(t.errors),
            "examples": t.examples, "p50_ms": pct(t.latencies, 0.5), "p99_ms": pct(t.latencies, 0.99),
        }
        for name, t in tallies.items()
    }  # fmt: skip
    start, window = args.warmup_seconds, args.window_seconds
    flat = {}
    for label in memory.samples:
        first, final = (
            memory.mean_mib(label, start, start + window),
            memory.mean_mib(label, seconds - window, seconds + 1),
        )
        growth = (final / first - 1) if first and final else None
        flat[label] = {
            "first_mib": first,
            "last_mib": final,
            "growth": growth,
            "flat": growth is not None and growth <= args.flat,
        }
    curve = []
    step = window
    t = 0.0
    while t < seconds:
        curve.append({"t": t, **{label: memory.mean_mib(label, t, t + step) for label in memory.samples}})
        t += step
    sent = sum(t.sent for t in mix.tallies.values())
    scheduled = sum(t.scheduled for t in mix.tallies.values())
    answered = sum(t.ok + t.wrong for t in mix.tallies.values())
    errors = sum(t.wrong for t in tallies.values())
    lost = sum(t.lost for t in tallies.values())
    verdict = {
        "scheduled": scheduled, "backlog": scheduled - sent, "sent": sent, "answered": answered, "lost": lost, "errors": errors, "duplicates": mix.duplicates,
        "memory_flat": all(v["flat"] for v in flat.values()),
    }  # fmt: skip
    verdict["pass"] = lost == 0 and errors == 0 and mix.duplicates == 0 and verdict["memory_flat"]
    return {
        "rate": rate, "seconds": seconds, "warmup_seconds": start, "window_seconds": window, "flat_bound": args.flat,
        "achieved_rate": scheduled / seconds if seconds else 0.0, "edits": edits, "edit_results": streams.edits, "backlog_at_end": backlog,
        "operations": ops, "windows": windows, "memory": flat, "curve": curve,
        "samples": {label: s for label, s in memory.samples.items()}, "verdict": verdict,
    }  # fmt: skip


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_report(report: dict[str, Any], argv: list[str]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# Soak: `bench/soak.py {' '.join(argv)}` ({time.strftime('%Y-%m-%d %H:%M')}, load average {load:.2f} at the end)\n"
    )
    if "probe" in report:
        probe = report["probe"]
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in probe["answered_per_second"].items())
        print(
            f"- maximum rate of the mix: {probe['max_rate']:.0f} operations/s (closed loop, answered/s: {kinds})"
        )
    print(
        f"- soaked at {report['rate']:.1f} operations/s for {report['seconds']:.0f} s "
        f"(started {report['achieved_rate']:.1f}/s); warm-up {report['warmup_seconds']:.0f} s, "
        f"memory compared over {report['window_seconds']:.0f} s windows; {report['edits']} catalog edits\n"
    )
    for i, e in enumerate(report.get("edit_results", []), 1):
        late = f", {e['told_late']} more later" if "told_late" in e else ""
        print(
            f"- edit {i}: {e['told']} of {e['streams']} held streams told within 10 s{late} (all after {e['seconds']} s)"
        )
    print()
    print("| operation | due | sent | answered right | wrong | lost | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, o in report["operations"].items():
        print(
            f"| {name} | {o['scheduled']:,} | {o['sent']:,} | {o['ok']:,} | {o['wrong']} | {o['lost']} | {fmt(o['p50_ms'], 2)} | {fmt(o['p99_ms'], 2)} |"
        )
    for name, o in report["operations"].items():
        for kind, n in o["errors"].items():
            print(f"  {name}: {n} x {kind}{' (lost)' if kind in LOST else ''}: {o['examples'].get(kind, '')}")
    print("\nLoad per window (operations answered per second, p99 from when each was due):\n")
    print("| until s | answered/s | p99 ms | errors | in flight at the end |")
    print("|---:|---:|---:|---:|---:|")
    for w in report["windows"]:
        print(f"| {w['t']:.0f} | {w['rate']:.1f} | {fmt(w['p99_ms'])} | {w['errors']} | {w['in_flight']} |")
    labels = list(report["memory"])
    print("\nMemory curve (mean RSS in MiB per window):\n")
    print("| from s | " + " | ".join(labels) + " |")
    print("|---:|" + "---:|" * len(labels))
    for row in report["curve"]:
        print(f"| {row['t']:.0f} | " + " | ".join(fmt(row.get(label)) for label in labels) + " |")
    print("\n| process | first window after warm-up MiB | last window MiB | growth | flat |")
    print("|---|---:|---:|---:|---|")
    for label, m in report["memory"].items():
        growth = "-" if m["growth"] is None else f"{m['growth'] * 100:+.1f}%"
        print(
            f"| {label} | {fmt(m['first_mib'])} | {fmt(m['last_mib'])} | {growth} | {'yes' if m['flat'] else 'NO'} |"
        )
    v = report["verdict"]
    print(
        f"\nVerdict: {'PASS' if v['pass'] else 'FAIL'}: operations sent {v['sent']:,}, answered {v['answered']:,}, "
        f"lost {v['lost']}, errors {v['errors']}, duplicate responses {v['duplicates']}, "
        f"due but never sent (the load fell behind) {v['backlog']:,}, "
        f"memory flat within {report['flat_bound'] * 100:.0f}%: {'yes' if v['memory_flat'] else 'no'}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    lock = None if args.no_lock else hold_bench_lock()
    try:
        report = asyncio.run(soak(args))
    finally:
        if lock is not None:
            lock.close()  # type: ignore[attr-defined]
    print_report(report, argv)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if report["verdict"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
