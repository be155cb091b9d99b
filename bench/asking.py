"""Background tools and tools that ask (issue 11): `bench/run.py --only-asking`, or part of a full run.

Four measurements, each printed against a baseline measured side by side in the same run:

1. Progress delivery: a tool's handler reports progress whose message is the wall-clock time of its
   progress call; the client (this process, same machine, same clock) takes receive time - send
   time for every notification. On a Celery worker (worker -> channel layer in Redis -> Daphne ->
   the call's SSE stream) vs the same tool inline in Daphne.
2. One elicitation round trip through a worker: the demo's `ask_name` on a worker, called by a
   legacy session client that answers at once, vs the same tool inline, vs a tool that gives the
   same answer without asking (`bench_greet`), on a worker and inline.
3. Background `tools/call` throughput with two worker processes vs one.
4. Many background runs (slow, with progress) held open by one Daphne process: its memory per open
   run, vs as many of the same tool inline on another fresh Daphne process.

The tools live in a tenant of their own (`bench-asking`), so no other phase sees them; the bench
callables (`bench/asking_callables.py`) are loaded through MCP_PYTHON_HANDLER_MODULES.
Longer than 400 lines: the asking client, the four phases and their tables are read together, as
run.py's phases are.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import redis.asyncio
from loadgen import BenchError, McpClient, PhaseResult, merge, proc_rss_kib, run_phase, tree_cpu_seconds
from procs import (
    HOST,
    PYTHON,
    Affinity,
    Server,
    celery_worker,
    daphne_server,
    log,
    run_checked,
    running,
    wait_workers_ready,
    worker_node,
)

TENANT = "bench-asking"
HANDLER_MODULES = "mcp_app.demo.callables,bench.asking_callables"
GREETING = "Hello, Ada!"  # what ask_name answers to "Ada", and what bench_greet always says
ANSWER = {"action": "accept", "content": {"name": "Ada"}}
PROGRESS_GOAL_MS = 20.0  # issue 11: p95 from the handler's progress call to the client below this
# As many clients as the default worker (prefork, concurrency 2) runs jobs at once: no background
# call of phases 1 and 2 waits in the queue, so what is timed is the hop, not a queue.
PAIR_CLIENTS = 2
THROUGHPUT_CLIENTS = 16  # enough to keep two worker processes busy
SLEEP_MS = 20  # phase 3's tool holds its worker this long, as a tool waiting on an API would
HELD_WORKERS = 5  # phase 4's worker processes (threads pool), together as many threads as runs
CHANNEL_CAPACITY = 1000  # mcpsite.settings CHANNEL_LAYERS: messages one channel holds before ChannelFull


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


# name: (registered callable, execution, input schema)
TOOLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "progress": ("bench_progress", "inline", _schema(steps="integer", interval_ms="integer")),
    "progress_bg": ("bench_progress", "background", _schema(steps="integer", interval_ms="integer")),
    "ask": ("ask_name", "inline", _schema(question="string")),
    "ask_bg": ("ask_name", "background", _schema(question="string")),
    "greet": ("bench_greet", "inline", _schema()),
    "greet_bg": ("bench_greet", "background", _schema()),
    "sleep_bg": ("bench_sleep", "background", _schema(ms="integer")),
    "echo_bg": ("echo", "background", _schema(message="string")),
}

SETUP = f"""
from mcp_app.models import Tool
from tenants.models import Tenant
tenant, _ = Tenant.objects.get_or_create(slug={TENANT!r}, defaults=dict(name={TENANT!r}, auth_mode="public"))
for name, (fn, execution, schema) in {TOOLS!r}.items():
    Tool.objects.update_or_create(tenant=tenant, name=name, defaults=dict(
        description="bench: " + fn, input_schema=schema, output_schema=None, handler="python",
        handler_config={{"callable": fn}}, execution=execution, timeout_seconds=120))
"""


@dataclass
class Timing:
    duration: float  # seconds measured per target, over all its slices
    warmup: float  # before every slice
    slices: int


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (as PhaseResult.pct), NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and not math.isnan(a) and not math.isnan(b) else "n/a"


# ---------------------------------------------------------------------------------------------
# The client: a legacy session that answers elicitations at once and times progress


class AskingClient(McpClient):
    """A 2025-06-18 session client that declares elicitation, answers every `elicitation/create` at
    once (on a second connection of the same session, as a real client's answer POST is), and
    notes for each progress notification when it arrived and how long after the handler's call."""

    capabilities = {"elicitation": {}}

    def __init__(self, host: str, port: int, path: str) -> None:
        super().__init__(host, port, path)
        self.answerer = McpClient(host, port, path)
        self.progress: list[tuple[float, float]] = []  # (arrival, wall clock; ms since the handler's call)
        self.asked = 0
        self.faults: list[str] = []  # what went wrong mid-stream (raised once the call is read)

    async def initialize(self) -> dict[str, Any]:
        result = await super().initialize()
        self.answerer.session_id, self.answerer.protocol_version = self.session_id, self.protocol_version
        return result

    async def _on_stream_message(self, msg: dict[str, Any]) -> None:
        now = time.time()
        method = msg.get("method")
        if method == "notifications/progress":
            params = msg.get("params") or {}
            try:
                self.progress.append((now, (now - float(params.get("message"))) * 1000))
            except (TypeError, ValueError):
                self.faults.append(f"progress without the handler's timestamp: {params!r}"[:200])
        elif method == "elicitation/create" and "id" in msg:
            self.asked += 1
            try:
                resp = await self.answerer.post({"jsonrpc": "2.0", "id": msg["id"], "result": ANSWER})
                if resp.status != 202:
                    self.faults.append(f"answer POST: HTTP {resp.status}")
            except BenchError as exc:
                self.faults.append(f"answer POST: {exc}"[:200])

    async def close(self) -> None:
        await self.answerer.close()
        await super().close()


async def call(
    client: AskingClient, tool: str, arguments: dict[str, Any], progress_token: str | None = None
) -> dict[str, Any]:
    """tools/call; the result, or BenchError for an isError result or anything wrong mid-stream."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    client.faults.clear()
    try:
        result = await client.request("tools/call", params)
    finally:
        client.notifications.clear()  # kept by McpClient; thousands of progress events per phase
    if client.faults:
        raise BenchError(f"{tool}: {client.faults[0]}")
    if result.get("isError"):
        raise BenchError(f"{tool} returned isError: {str(result.get('content'))[:200]}")
    return result


def first_text(result: dict[str, Any]) -> str:
    content = result.get("content") or []
    return str(content[0].get("text")) if content and isinstance(content[0], dict) else ""


Op = Callable[[McpClient, int], Awaitable[None]]


def progress_op(tool: str, steps: int, interval_ms: int) -> Op:
    async def op(client: McpClient, n: int) -> None:
        assert isinstance(client, AskingClient)
        before = len(client.progress)
        await call(client, tool, {"steps": steps, "interval_ms": interval_ms}, progress_token=f"p{n}")
        if len(client.progress) - before != steps:
            raise BenchError(f"{tool}: {len(client.progress) - before} of {steps} progress notifications")

    return op


def ask_op(tool: str, asks: int) -> Op:
    """Call `tool`; it must greet Ada after exactly `asks` questions answered."""
    arguments = {"question": "Who are you?"} if asks else {}

    async def op(client: McpClient, n: int) -> None:
        assert isinstance(client, AskingClient)
        before = client.asked
        text = first_text(await call(client, tool, arguments))
        if text != GREETING or client.asked - before != asks:
            raise BenchError(f"{tool}: {text!r} after {client.asked - before} question(s), wanted {asks}")

    return op


def sleep_op(tool: str) -> Op:
    async def op(client: McpClient, n: int) -> None:
        assert isinstance(client, AskingClient)
        await call(client, tool, {"ms": SLEEP_MS})

    return op


def echo_op(tool: str) -> Op:
    async def op(client: McpClient, n: int) -> None:
        assert isinstance(client, AskingClient)
        message = f"hello {n}"
        if first_text(await call(client, tool, {"message": message})) != message:
            raise BenchError(f"{tool} did not echo {message!r}")

    return op


async def open_clients(n: int, server: Server, parallel: int = 32) -> list[AskingClient]:
    sem = asyncio.Semaphore(parallel)
    clients = [AskingClient(HOST, server.port, server.path) for _ in range(n)]

    async def init(c: AskingClient) -> None:
        async with sem:
            await c.initialize()

    await asyncio.gather(*(init(c) for c in clients))
    return clients


async def close_clients(clients: Sequence[AskingClient]) -> None:
    await asyncio.gather(*(c.delete_session() for c in clients), return_exceptions=True)
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


# ---------------------------------------------------------------------------------------------
# Phases 1-3: targets loaded one at a time, slices alternating


@dataclass
class Target:
    key: str
    server: Server
    clients: list[AskingClient]
    op: Op
    worker: Server | None = None  # whose CPU to measure (the worker of a background target)


@dataclass
class Measured:
    calls: PhaseResult
    progress_ms: list[float] = field(default_factory=list)  # every notification in the windows
    # The worker's CPU (all its processes) as a fraction of a core, over whole slices: run_phase
    # times only the server; warm-up and window carry the same load, so the share is the same.
    worker_cpu: float | None = None

    def cpu_ms_per_call(self, share: float | None) -> str:
        r = self.calls
        return f"{share / r.rps * 1000:.2f}" if share is not None and r.rps else "-"


async def alternate(targets: Sequence[Target], timing: Timing) -> dict[str, Measured]:
    """Run every target in `timing.slices` slices, one target loaded at a time, the order reversed
    every other round; keep the progress delays that arrived inside each slice's window."""
    for t in targets:  # warm every path once (imports, catalog, worker's event loop and pools)
        await asyncio.gather(*(t.op(c, 0) for c in t.clients))
    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    delays: dict[str, list[float]] = collections.defaultdict(list)
    worker_cpu: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)  # (CPU s, wall s)
    seconds = timing.duration / timing.slices
    for rnd in range(timing.slices):
        for t in targets if rnd % 2 == 0 else targets[::-1]:
            log(f"asking: {t.key} (slice {rnd + 1}/{timing.slices})")
            for c in t.clients:
                c.progress.clear()
            window = time.time() + timing.warmup
            cpu0 = tree_cpu_seconds(t.worker.pid) if t.worker else None
            wall0 = time.monotonic()
            raw[t.key].append(
                await run_phase(t.key, t.clients, t.op, seconds, timing.warmup, server_pid=t.server.pid)
            )
            cpu1 = tree_cpu_seconds(t.worker.pid) if t.worker else None
            if cpu0 is not None and cpu1 is not None:
                worker_cpu[t.key].append((cpu1 - cpu0, time.monotonic() - wall0))
            delays[t.key] += [
                ms for c in t.clients for at, ms in c.progress if window <= at <= window + seconds
            ]
    share = {k: sum(c for c, _ in v) / sum(w for _, w in v) for k, v in worker_cpu.items() if v}
    return {key: Measured(merge(rs), delays[key], share.get(key)) for key, rs in raw.items()}


# ---------------------------------------------------------------------------------------------
# Phase 4: many slow runs held open on one Daphne process


HOLD_TIMEOUT = 120.0  # a client of a slow tool waits for its answer as long as the tool may run


@dataclass
class Held:
    runs: int
    under_way: int  # most runs seen running at once (background: ToolRun rows "running")
    open_seconds: float | None  # from the first call sent until all were under way (None: never)
    seconds: float  # from the first call sent to the last answer
    rss_idle_kib: int  # Daphne after warm-up
    rss_sessions_kib: int  # ... with the sessions initialized, their connections open
    rss_open_kib: int  # ... with every call open (read once all were under way, or before any can end)
    worker_rss_kib: int | None
    daphne_cpu: float  # share of a core from the first call to the last answer
    worker_cpu: float | None
    answered: int  # calls whose result was no error (with or without all their progress)
    progress_got: int
    progress_expected: int
    backlog_max: int  # most replies waiting at once in Daphne's channel-layer reply list
    errors: collections.Counter[str]
    progress_ms: list[float]

    @property
    def per_run_kib(self) -> float:
        return (self.rss_open_kib - self.rss_sessions_kib) / max(1, self.runs)


class Observer:
    """Samples, while runs are held, how many run and how many replies wait in Daphne's reply list."""

    def __init__(self, env: dict[str, str], tool: str, clients: Sequence[AskingClient], background: bool):
        self.database_url = env["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
        self.redis = redis.asyncio.Redis.from_url(env["REDIS_URL"])
        self.tool, self.clients, self.background = tool, clients, background
        self.under_way = self.backlog_max = 0

    async def running(self, conn: psycopg.AsyncConnection[Any], since: datetime.datetime) -> int:
        if not self.background:  # inline runs start at once; the first progress says so
            return sum(1 for c in self.clients if c.progress)
        # The first progress of a background run may wait behind other replies: ask the run rows.
        cur = await conn.execute(
            "SELECT count(*) FROM mcp_app_toolrun WHERE tool_name = %s AND status = 'running' "
            "AND queued_at >= %s",
            (self.tool, since),
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def backlog(self) -> int:
        """The longest channels_redis list of process-specific channels (a Daphne's replies)."""
        most = 0
        async for key in self.redis.scan_iter(match="asgi*specific.*!", count=1000):
            most = max(most, await self.redis.zcard(key))
        return most

    async def watch(self, all_under_way: asyncio.Event, since: datetime.datetime) -> None:
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
            while True:
                now = await self.running(conn, since)
                self.under_way = max(self.under_way, now)
                if now >= len(self.clients):
                    all_under_way.set()
                self.backlog_max = max(self.backlog_max, await self.backlog())
                await asyncio.sleep(0.25)

    async def close(self) -> None:
        await self.redis.aclose()


async def hold_runs(
    server: Server, tool: str, n: int, steps: int, interval_ms: int, workers: Sequence[Server]
) -> Held:
    """Open `n` sessions, then one slow call with progress on each; read Daphne's RSS once all run."""
    await server.wait_ready()
    warm = (await open_clients(1, server))[0]
    await progress_op(tool, 2, 10)(warm, 0)
    await close_clients([warm])
    await asyncio.sleep(1.0)
    rss_idle = proc_rss_kib(server.pid) or 0
    log(f"asking: {tool}: initializing {n} sessions")
    clients = await open_clients(n, server)
    for c in clients:
        c.request_timeout = HOLD_TIMEOUT
    await asyncio.sleep(1.0)
    rss_sessions = proc_rss_kib(server.pid) or 0
    observer = Observer(server.env, tool, clients, background=bool(workers))
    all_under_way = asyncio.Event()
    log(f"asking: {tool}: starting {n} runs ({steps} steps of {interval_ms} ms)")
    op = progress_op(tool, steps, interval_ms)
    cpu0 = tree_cpu_seconds(server.pid) or 0.0, sum(tree_cpu_seconds(w.pid) or 0.0 for w in workers)
    t0 = time.monotonic()
    watcher = asyncio.create_task(observer.watch(all_under_way, datetime.datetime.now(datetime.UTC)))
    tasks = [asyncio.create_task(op(c, i)) for i, c in enumerate(clients)]
    open_seconds: float | None = None
    with contextlib.suppress(TimeoutError):
        # The figure is read with every run under way, at the latest a second before the first run
        # can end: every call is still open in Daphne then, running or waiting for a worker.
        async with asyncio.timeout(max(0.0, steps * interval_ms / 1000 - 2.0)):
            await all_under_way.wait()
            open_seconds = time.monotonic() - t0
    await asyncio.sleep(1.0)
    rss_open = proc_rss_kib(server.pid) or 0
    worker_rss = sum(proc_rss_kib(w.pid) or 0 for w in workers) if workers else None
    log(f"asking: {tool}: {observer.under_way} of {n} under way; waiting for them to finish")
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    seconds = time.monotonic() - t0
    cpu1 = tree_cpu_seconds(server.pid) or 0.0, sum(tree_cpu_seconds(w.pid) or 0.0 for w in workers)
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    await observer.close()
    errors: collections.Counter[str] = collections.Counter(
        f"{type(o).__name__}: {o}"[:200] for o in outcomes if isinstance(o, BaseException)
    )
    delays = [ms for c in clients for _, ms in c.progress]
    await close_clients(clients)
    return Held(
        runs=n,
        under_way=observer.under_way,
        open_seconds=open_seconds,
        seconds=seconds,
        rss_idle_kib=rss_idle,
        rss_sessions_kib=rss_sessions,
        rss_open_kib=rss_open,
        worker_rss_kib=worker_rss,
        daphne_cpu=(cpu1[0] - cpu0[0]) / seconds,
        worker_cpu=(cpu1[1] - cpu0[1]) / seconds if workers else None,
        # A call whose progress was partly dropped was still answered (progress_op checks after).
        answered=n - sum(v for k, v in errors.items() if "progress notifications" not in k),
        progress_got=len(delays),
        progress_expected=n * steps,
        backlog_max=observer.backlog_max,
        errors=errors,
        progress_ms=delays,
    )


# ---------------------------------------------------------------------------------------------
# Running and printing


def asking_env(env: dict[str, str], queue: str) -> dict[str, str]:
    return dict(
        env,
        MCP_BACKGROUND_TOOLS="celery",
        MCP_PYTHON_HANDLER_MODULES=HANDLER_MODULES,
        MCP_BACKGROUND_QUEUE=queue,
    )


def queue_of(label: str) -> str:
    return f"bench-{label}"


def asking_server(env: dict[str, str], affinity: Affinity, label: str) -> Server:
    """A Daphne process whose background tools go to a queue of its own (`queue_of(label)`)."""
    server = daphne_server(asking_env(env, queue_of(label)), affinity.server, label=f"asking-{label}")
    server.path = f"/t/{TENANT}/mcp"
    return server


# Several workers share the broker here: without the start-up sync and the chatter between workers
# (neither changes how a task runs) they start sooner and stay quiet while others are measured.
QUIET = ["--without-gossip", "--without-mingle", "--without-heartbeat"]


def pair(env: dict[str, str], affinity: Affinity, label: str, pool: Sequence[str]) -> tuple[Server, Server]:
    """A Daphne process and the worker that alone consumes its queue."""
    server = asking_server(env, affinity, label)
    worker = celery_worker(
        server.env, affinity.server, pool=[*pool, *QUIET], label=f"worker-{label}", queue=queue_of(label)
    )
    return server, worker


async def drive_pairs(
    one: Server, two: Server, workers: dict[str, Server], quick: bool
) -> dict[str, dict[str, Measured]]:
    """Phases 1-3 on two Daphne processes: `two` has the default worker (prefork, two processes),
    `one` a worker with one process."""
    short = Timing(duration=2.0, warmup=0.3, slices=1) if quick else None
    await one.wait_ready()
    await two.wait_ready()
    pairs = await open_clients(PAIR_CLIENTS, two)
    many = {s.label: await open_clients(THROUGHPUT_CLIENTS, s) for s in (one, two)}
    steps, interval = 20, 20
    try:
        progress = await alternate(
            [
                Target(
                    "background", two, pairs, progress_op("progress_bg", steps, interval), workers[two.label]
                ),
                Target("inline", two, pairs, progress_op("progress", steps, interval)),
            ],
            short or Timing(duration=6.0, warmup=0.5, slices=2),
        )
        asking = await alternate(
            [
                Target("ask on worker", two, pairs, ask_op("ask_bg", 1), workers[two.label]),
                Target("ask inline", two, pairs, ask_op("ask", 1)),
                Target("no ask on worker", two, pairs, ask_op("greet_bg", 0), workers[two.label]),
                Target("no ask inline", two, pairs, ask_op("greet", 0)),
            ],
            short or Timing(duration=3.0, warmup=0.5, slices=2),
        )
        throughput: dict[str, Measured] = {}
        for tool, op in (("sleep_bg", sleep_op("sleep_bg")), ("echo_bg", echo_op("echo_bg"))):
            measured = await alternate(
                [Target(f"{tool} {s.label}", s, many[s.label], op, workers[s.label]) for s in (two, one)],
                short or Timing(duration=4.0, warmup=0.5, slices=2),
            )
            throughput.update(measured)
    finally:
        await close_clients(pairs)
        for cs in many.values():
            await close_clients(cs)
    return {"progress": progress, "asking": asking, "throughput": throughput}


def errors_of(label: str, errors: collections.Counter[str]) -> list[str]:
    return [f"  ERROR {label}: {count} x {err}" for err, count in errors.most_common(5)]


def print_progress(results: dict[str, Measured], steps: int, interval: int) -> list[str]:
    lines = [
        f"### 1. Progress delivery, handler's progress call -> client ({PAIR_CLIENTS} clients, "
        f"{steps} progress steps {interval} ms apart per call)",
        "",
        "| tool runs | calls | progress events | p50 ms | p95 ms | p99 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("background", "on the Celery worker"), ("inline", "inline in Daphne")):
        m = results[key]
        d = m.progress_ms
        lines.append(
            f"| {label} | {m.calls.requests} | {len(d)} | {pct(d, 0.5):.2f} | {pct(d, 0.95):.2f} | "
            f"{pct(d, 0.99):.2f} | {pct(d, 1.0):.2f} | {sum(m.calls.errors.values())} |"
        )
    bg, inline = results["background"].progress_ms, results["inline"].progress_ms
    verdict = "MET" if pct(bg, 0.95) < PROGRESS_GOAL_MS else "NOT MET"
    lines += [
        "",
        f"- background/inline: p50 {ratio(pct(bg, 0.5), pct(inline, 0.5))}, p95 "
        f"{ratio(pct(bg, 0.95), pct(inline, 0.95))}; background p95 {pct(bg, 0.95):.2f} ms -> {verdict} "
        f"(goal: p95 < {PROGRESS_GOAL_MS:g} ms)",
    ]
    for key, m in results.items():
        lines += errors_of(f"progress {key}", m.calls.errors)
    return lines


ASK_ROWS = (
    ("ask on worker", "ask_name (asks once)", "Celery worker"),
    ("ask inline", "ask_name (asks once)", "inline"),
    ("no ask on worker", "bench_greet (no question)", "Celery worker"),
    ("no ask inline", "bench_greet (no question)", "inline"),
)


def print_asking(results: dict[str, Measured]) -> list[str]:
    lines = [
        f"### 2. One elicitation round trip through a worker ({PAIR_CLIENTS} clients, closed loop; the "
        "client answers on a second connection as soon as the question arrives)",
        "",
        "| tool | runs | calls/s | p50 ms | p95 ms | p99 ms | errors | Daphne CPU ms/call | worker CPU ms/call |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, tool, where in ASK_ROWS:
        m = results[key]
        r = m.calls
        lines.append(
            f"| {tool} | {where} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.95):.2f} | {r.pct(0.99):.2f} | "
            f"{sum(r.errors.values())} | {m.cpu_ms_per_call(r.server_cpu)} | {m.cpu_ms_per_call(m.worker_cpu)} |"
        )
    lines += ["", "| ratio | p50 | p95 |", "|---|---:|---:|"]
    for num, den, what in (
        ("ask on worker", "ask inline", "asking, on a worker / inline"),
        ("ask on worker", "no ask on worker", "on a worker, asking / not asking"),
        ("ask inline", "no ask inline", "inline, asking / not asking"),
        ("no ask on worker", "no ask inline", "not asking, on a worker / inline"),
    ):
        a, b = results[num].calls, results[den].calls
        lines.append(f"| {what} | {ratio(a.pct(0.5), b.pct(0.5))} | {ratio(a.pct(0.95), b.pct(0.95))} |")
    bg = results["ask on worker"].calls.pct(0.5) - results["no ask on worker"].calls.pct(0.5)
    inline = results["ask inline"].calls.pct(0.5) - results["no ask inline"].calls.pct(0.5)
    lines += [
        "",
        f"- the question's own cost (p50 of asking - p50 of not asking): on a worker {bg:.2f} ms, "
        f"inline {inline:.2f} ms",
    ]
    for key, m in results.items():
        lines += errors_of(f"asking {key}", m.calls.errors)
    return lines


def print_throughput(results: dict[str, Measured], one: str, two: str) -> list[str]:
    lines = [
        f"### 3. Background tools/call throughput, two worker processes vs one ({THROUGHPUT_CLIENTS} "
        "clients, closed loop)",
        "",
        "| tool | worker | calls/s | p50 ms | p99 ms | errors | Daphne CPU | worker CPU | other CPU | "
        "worker CPU ms/call |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    tools = (
        ("sleep_bg", f"bench_sleep ({SLEEP_MS} ms asleep)"),
        ("echo_bg", "echo (no work: the hop alone)"),
    )
    for tool, label in tools:
        for server, where in ((two, "prefork, 2 processes"), (one, "prefork, 1 process")):
            m = results[f"{tool} {server}"]
            r = m.calls
            srv = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
            wrk = f"{m.worker_cpu * 100:.0f}%" if m.worker_cpu is not None else "?"
            # run_phase's "other" is everything but Daphne and the load generator: take the worker out.
            oth = (
                f"{max(0.0, r.other_cpu - m.worker_cpu) * 100:.0f}%"
                if r.other_cpu is not None and m.worker_cpu is not None
                else "?"
            )
            lines.append(
                f"| {label} | {where} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | "
                f"{sum(r.errors.values())} | {srv} | {wrk} | {oth} | {m.cpu_ms_per_call(m.worker_cpu)} |"
            )
    lines.append("")
    for tool, label in tools:
        a, b = results[f"{tool} {two}"].calls, results[f"{tool} {one}"].calls
        lines.append(
            f"- {label}: two/one worker processes throughput {ratio(a.rps, b.rps)}, p50 "
            f"{ratio(a.pct(0.5), b.pct(0.5))}"
        )
    for key, m in results.items():
        lines += errors_of(f"throughput {key}", m.calls.errors)
    return lines


def print_held(bg: Held, inline: Held, steps: int, interval: int) -> list[str]:
    replies = bg.runs * 1000 / interval  # progress only: signs of life are a Redis key
    lines = [
        f"### 4. {bg.runs} slow runs held open by one Daphne process ({steps} progress steps {interval} ms "
        "apart each, one session and connection per run)",
        "",
        "| tool runs | most under way at once | all under way after | Daphne RSS idle | with sessions | "
        "with the calls open | per open call | progress received | progress p50 / p95 ms | answered | "
        "first call to last answer | Daphne CPU | reply backlog (max) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for h, label in ((bg, "on the Celery worker"), (inline, "inline in Daphne")):
        opened = f"{h.open_seconds:.1f} s" if h.open_seconds is not None else "never"
        backlog = str(h.backlog_max) if h is bg else "-"
        lines.append(
            f"| {label} | {h.under_way} / {h.runs} | {opened} | {h.rss_idle_kib / 1024:.1f} MiB | "
            f"{h.rss_sessions_kib / 1024:.1f} MiB | {h.rss_open_kib / 1024:.1f} MiB | {h.per_run_kib:.1f} KiB | "
            f"{h.progress_got} / {h.progress_expected} | {pct(h.progress_ms, 0.5):.1f} / "
            f"{pct(h.progress_ms, 0.95):.1f} | {h.answered} / {h.runs} | {h.seconds:.1f} s | "
            f"{h.daphne_cpu * 100:.0f}% | {backlog} |"
        )
    lines += [
        "",
        f"- Daphne memory per open call, background/inline: {ratio(bg.per_run_kib, inline.per_run_kib)} "
        f"({bg.per_run_kib:.1f} vs {inline.per_run_kib:.1f} KiB); progress p95 background/inline "
        f"{ratio(pct(bg.progress_ms, 0.95), pct(inline.progress_ms, 0.95))}",
        f"- replies the background runs send this Daphne: about {replies:,.0f}/s (their progress; signs of "
        f"life are a Redis key, not replies); the reply list holds at most {CHANNEL_CAPACITY} (channel layer "
        "capacity): past that, progress is dropped",
    ]
    if bg.worker_rss_kib is not None and bg.worker_cpu is not None:
        lines.append(
            f"- the workers ({HELD_WORKERS} processes, threads pool, {math.ceil(bg.runs / HELD_WORKERS)} threads "
            f"each, on the load generator's core): {bg.worker_rss_kib / 1024:.1f} MiB RSS together, "
            f"{bg.worker_cpu * 100:.0f}% CPU"
        )
    lines += errors_of("held background", bg.errors) + errors_of("held inline", inline.errors)
    return lines


def held_workers(env: dict[str, str], affinity: Affinity, runs: int) -> list[Server]:
    """Phase 4's workers: HELD_WORKERS threads-pool processes, `runs` threads together.

    Several processes: one process of `runs` threads starts jobs slowly (its threads contend for
    the GIL), which would hide what Daphne does. Their jobs' own polling (a cancellation check five
    times a second and a sign of life every second, per run) is worker work that shares a machine
    with Daphne only here: it runs on the load generator's core.
    """
    threads = math.ceil(runs / HELD_WORKERS)
    return [
        celery_worker(
            asking_env(env, queue_of("held")),
            affinity.loadgen,
            pool=["--pool=threads", f"--concurrency={threads}", *QUIET],
            label=f"worker-held-{i}",
            queue=queue_of("held"),
        )
        for i in range(HELD_WORKERS)
    ]


def print_asking_section(env: dict[str, str], affinity: Affinity, quick: bool, runs: int) -> list[str]:
    """Issue 11's figures: set up the tools, start the processes, run the four phases, print."""
    print("## Background tools and tools that ask (issue 11)")
    print()
    print(
        "Legacy sessions (2025-06-18), one keep-alive connection per client; every answer is checked. "
        "Broker and channel layer: Redis. Phases 1-3: two Daphne processes, each with a queue and a "
        "worker of its own, all pinned to the server core: one with the worker bin/serve starts "
        "(prefork, concurrency 2: phases 1-3), one with a worker of one process (phase 3). Targets of a "
        "phase are loaded one at a time, slices alternating (order reversed every other round). Phase 4: "
        f"a fresh Daphne with {HELD_WORKERS} threads-pool workers ({runs} threads together, on the load "
        "generator's core; started with the others, idle until then) for the background runs, then "
        "another fresh Daphne for the inline ones."
    )
    print()
    run_checked(
        [PYTHON, "manage.py", "shell", "-c", SETUP],
        asking_env(env, "bench-setup"),
        "asking bench setup",
    )
    two, worker_two = pair(env, affinity, "two", ["--concurrency=2"])
    one, worker_one = pair(env, affinity, "one", ["--concurrency=1"])
    workers = held_workers(env, affinity, runs)
    steps, interval = (6, 1000) if quick else (10, 1000)
    with contextlib.ExitStack() as held_stack:
        # Phase 4's workers boot on the other core while phases 1-3's processes boot on this one.
        with contextlib.ExitStack() as stack:
            for process in (worker_two, worker_one, two, one, *workers):
                log(f"{process.label}: starting")
                (stack if process in (worker_two, worker_one, two, one) else held_stack).enter_context(
                    running(process)
                )
            everyone = [worker_two, worker_one, *workers]
            wait_workers_ready(everyone, [worker_node(w.label) for w in everyone])
            results = asyncio.run(
                drive_pairs(one, two, {two.label: worker_two, one.label: worker_one}, quick)
            )
        lines = print_progress(results["progress"], 20, 20)
        lines += [""] + print_asking(results["asking"])
        lines += [""] + print_throughput(results["throughput"], one.label, two.label)
        for line in lines:
            print(line)
        server = asking_server(env, affinity, "held")
        with running(server):
            held_bg = asyncio.run(hold_runs(server, "progress_bg", runs, steps, interval, workers))
    server = asking_server(env, affinity, "held-inline")
    with running(server):
        held_inline = asyncio.run(hold_runs(server, "progress", runs, steps, interval, []))
    held = print_held(held_bg, held_inline, steps, interval)
    print()
    for line in held:
        print(line)
    return lines + [""] + held
