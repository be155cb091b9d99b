"""Held-open streams: the listen phase and the legacy GET-stream phase open and time them the same way
(bounded concurrency, RSS, one edit, delivery to every stream); and the 1,000 open GET streams phase."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from loadgen import (  # noqa: E402
    BenchError,
    GetStream,
    McpClient,
    SseStream,
    make_clients,
    proc_rss_kib,
)
from procs import (  # noqa: E402
    HOST,
    PYTHON,
    ROOT,
    Server,
    log,
)

S = TypeVar("S", bound=SseStream)


LIST_CHANGED = "notifications/tools/list_changed"


OPEN_PARALLEL = 64


async def open_streams(
    streams: Sequence[S], parallel: int = OPEN_PARALLEL
) -> tuple[list[S], collections.Counter[str], float]:
    """Open every stream, `parallel` at a time; return the opened ones, why the others failed,
    and the seconds the whole opening took."""
    errors: collections.Counter[str] = collections.Counter()
    sem = asyncio.Semaphore(parallel)

    async def open_one(s: S) -> bool:
        async with sem:
            try:
                await s.open()
                return True
            except (TimeoutError, BenchError, OSError, asyncio.IncompleteReadError) as exc:
                errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                return False

    t_open = time.monotonic()
    flags = await asyncio.gather(*(open_one(s) for s in streams))
    seconds = time.monotonic() - t_open
    return [s for s, ok in zip(streams, flags, strict=True) if ok], errors, seconds


@dataclass
class Delivery:
    delivered: int  # streams whose `got` was set
    seconds: float  # from starting the trigger until all had it (or the wait ran out)
    trigger_seconds: float  # the trigger subprocess, Django start included
    first_ms: float | None  # after the trigger's save() returned
    last_ms: float | None


async def trigger_and_wait(
    streams: Sequence[SseStream],
    env: dict[str, str],
    script: str,
    wait_seconds: float,
    errors: collections.Counter[str],
) -> Delivery:
    """Run `script` (an edit that prints `SAVED <time.time()>` once committed) in a `manage.py shell`
    subprocess and wait up to `wait_seconds` for every stream to receive its `want_method`.

    Streams that broke and a trigger that failed are counted in `errors`; first/last are timed from
    the moment save() returned."""
    arrival: dict[int, float] = {}

    async def watch(i: int, s: SseStream) -> None:
        await s.got.wait()
        arrival[i] = time.time()

    watchers = [asyncio.create_task(watch(i, s)) for i, s in enumerate(streams)]
    t0 = time.time()
    trigger = await asyncio.create_subprocess_exec(
        PYTHON, "manage.py", "shell", "-c", script, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await trigger.communicate()
    t_trigger = time.time() - t0
    saved = [
        line.split()[1] for line in out.decode(errors="replace").splitlines() if line.startswith("SAVED ")
    ]
    t_saved = float(saved[0]) if saved else None
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*watchers), wait_seconds)
    elapsed = time.time() - t0
    for w in watchers:
        w.cancel()
    for s in streams:
        if s.error:
            errors[f"stream: {s.error}"[:200]] += 1
    if trigger.returncode != 0 or t_saved is None:
        errors[f"trigger exit {trigger.returncode}: {out.decode(errors='replace')[-300:]}"] += 1
    times = sorted(arrival.values())
    return Delivery(
        delivered=len(arrival),
        seconds=elapsed,
        trigger_seconds=t_trigger,
        first_ms=(times[0] - t_saved) * 1000 if times and t_saved else None,
        last_ms=(times[-1] - t_saved) * 1000 if times and t_saved else None,
    )


@dataclass
class HeldStreams:
    """Streams held open on one server process, and one edit's notification timed to all of them."""

    streams: int  # requested
    opened: int
    errors: collections.Counter[str]  # opening, broken streams, the trigger
    open_seconds: float
    rss_streams_kib: int  # server VmRSS with the streams open
    delivery: Delivery


async def hold_streams(
    server: Server,
    env: dict[str, str],
    streams: Sequence[SseStream],
    script: str,
    wait_seconds: float,
    label: str,
    doing: str,
) -> HeldStreams:
    """Open `streams`, read the server's RSS once it settles, run the edit `script`, time its
    notification to every open stream, then close them all."""
    opened, errors, open_seconds = await open_streams(streams)
    await asyncio.sleep(2.0)
    rss = proc_rss_kib(server.pid) or 0
    log(f"{label}: {len(opened)} open; {doing}")
    delivery = await trigger_and_wait(opened, env, script, wait_seconds, errors)
    await asyncio.gather(*(s.close() for s in streams))
    return HeldStreams(len(streams), len(opened), errors, open_seconds, rss, delivery)


def print_held(lines: list[str], held: HeldStreams, label: str) -> list[str]:
    """Print a stream phase's lines, then its five most common errors; return the lines."""
    for line in lines:
        print(line)
    for err, count in held.errors.most_common(5):
        print(f"  ERROR {label}: {count} x {err}")
    return lines


@dataclass
class StreamResult:
    rss_start_kib: int  # server VmRSS after warm-up
    rss_sessions_kib: int  # ... with the sessions initialized (their POST connections closed)
    held: HeldStreams


# Saving a tool unchanged is an edit as far as the signals go; it leaves the demo data as it was.
# Prints the wall-clock time the save returned (after commit) so delivery is timed from there.
TRIGGER = (
    "import time; from mcp_app.models import Tool; "
    "t = Tool.objects.get(tenant__slug='demo', name='echo'); t.save(); print('SAVED', time.time())"
)


async def streams_bench(server: Server, env: dict[str, str], n: int, wait_seconds: float) -> StreamResult:
    await server.wait_ready()
    warm = McpClient(HOST, server.port, server.path)
    await warm.initialize()
    await warm.call_echo("warm")
    await warm.delete_session()
    await warm.close()
    await asyncio.sleep(1.0)
    rss0 = proc_rss_kib(server.pid) or 0
    log(f"streams: initializing {n} sessions")
    clients = await make_clients(n, HOST, server.port, server.path, parallel=32)
    # The POST connections are not needed any more; only the streams stay open.
    await asyncio.gather(*(c.close() for c in clients))
    await asyncio.sleep(1.0)
    rss1 = proc_rss_kib(server.pid) or 0
    log(f"streams: opening {n} GET streams")
    streams = [GetStream(c, want_method=LIST_CHANGED) for c in clients]
    held = await hold_streams(
        server,
        env,
        streams,
        TRIGGER,
        wait_seconds,
        "streams",
        "triggering list_changed with an edit in a subprocess",
    )
    await asyncio.gather(*(c.delete_session() for c in clients), return_exceptions=True)
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    return StreamResult(rss_start_kib=rss0, rss_sessions_kib=rss1, held=held)


def print_streams(s: StreamResult) -> list[str]:
    h, d = s.held, s.held.delivery
    per_stream = (h.rss_streams_kib - s.rss_sessions_kib) / max(1, h.opened)
    per_session = (s.rss_sessions_kib - s.rss_start_kib) / max(1, h.streams)
    lines = [
        f"- streams requested / opened: {h.streams} / {h.opened}",
        f"- server RSS: start {s.rss_start_kib / 1024:.1f} MiB, after {h.streams} sessions "
        f"{s.rss_sessions_kib / 1024:.1f} MiB, with the streams open {h.rss_streams_kib / 1024:.1f} MiB",
        f"- memory per session {per_session:.1f} KiB, per open GET stream {per_stream:.1f} KiB",
        f"- list_changed delivered to {d.delivered} / {h.opened} streams within {d.seconds:.1f}s "
        f"(after save() returned: first {d.first_ms if d.first_ms is None else round(d.first_ms)} ms, "
        f"last {d.last_ms if d.last_ms is None else round(d.last_ms)} ms)",
        "- trigger: Tool.save() of demo/echo in a `manage.py shell` subprocess "
        f"({d.trigger_seconds:.1f}s incl. Django start)",
    ]
    return print_held(lines, h, "streams")
