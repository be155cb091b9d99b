"""The soak's traffic (bench/soak.py): a weighted mix of operations, every one counted, and held streams.

An operation is one client action checked end to end: a `tools/call` of `echo` on a legacy session or
on the 2026-07-28 wire (stateless), a `count_slowly` call whose progress arrives on its SSE response,
a `count_in_background` call that runs on the Celery worker (progress and result through the channel
layer), or a whole short session (initialize, tools/list, DELETE). Besides, `subscriptions/listen`
streams and legacy GET streams are held open all along, a few replaced every few seconds.

Every operation due is counted (`scheduled`); once it has a client and its first request goes out it
is `sent`. Scheduled but never sent means the client side fell behind: those still waiting for a client
when the soak ends are cancelled and counted apart (a backlog, not a lost response). Every operation
sent is counted once: answered and right (`ok`), answered but wrong (an error by kind:
an HTTP status, a JSON-RPC error, a tool error, a wrong answer), or lost (no answer: a timeout, a
connection closed before the answer, or still unanswered when the soak ends). A second JSON-RPC
response with the same id on one response stream is counted as a duplicate.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadgen import (
    REQUEST_TIMEOUT,
    BenchError,
    GetStream,
    HttpResponse,
    ListenStream,
    McpClient,
    ModernClient,
)
from procs import HOST, Server

LIST_CHANGED = "notifications/tools/list_changed"
PROGRESS_STEPS = 3  # count_slowly: this many progress notifications per call
BACKGROUND_STEPS = 2  # count_in_background: this many, from the worker
STEP_DELAY = 0.02  # seconds between steps: streams stay open a little, the mix stays cheap
# Errors that mean no answer came at all (the response is lost, not wrong).
LOST = ("timeout", "connection closed", "unfinished")


class DuplicateCheck:
    """Counts, for every POST, JSON-RPC responses beyond the first carrying the request's id."""

    duplicates = 0

    async def post(self, payload: dict[str, Any], headers: dict[str, str] | None = None) -> HttpResponse:
        resp = await super().post(payload, headers)  # type: ignore[misc]
        want = payload.get("id")
        if want is not None:
            self.duplicates += sum(1 for m in resp.others if m.get("id") == want and "method" not in m)
        return resp


class LegacyClient(DuplicateCheck, McpClient):
    """A 2025-06-18 session client whose responses are checked for duplicates."""


class StatelessClient(DuplicateCheck, ModernClient):
    """A 2026-07-28 client (no session) whose responses are checked for duplicates."""


def error_kind(message: str) -> str:
    """A short kind for an error message, so errors are counted by what went wrong."""
    if match := re.search(r"HTTP (\d{3})", message):
        return f"HTTP {match.group(1)}"
    if match := re.search(r"JSON-RPC error \{'code': (-?\d+)", message):
        return f"JSON-RPC error {match.group(1)}"
    if "TimeoutError" in message:
        return "timeout"
    if "connection closed" in message or "reading response" in message:
        return "connection closed"
    if "unfinished" in message:
        return "unfinished"
    if "isError" in message:
        return "tool error"
    return "wrong answer"


async def call_tool(
    client: McpClient, name: str, arguments: dict[str, Any], token: str | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    client.notifications.clear()
    result = await client.request("tools/call", params)
    if result.get("isError"):
        raise BenchError(f"{name} returned isError: {str(result.get('content'))[:200]}")
    return result


async def echo(client: McpClient, n: int) -> None:
    await client.call_echo(f"soak {n}")


def counting(tool: str, steps: int) -> Callable[[McpClient, int], Awaitable[None]]:
    """A call of a count_slowly tool: `steps` progress notifications with its token, then its result."""

    async def op(client: McpClient, n: int) -> None:
        token = f"soak-{n}"
        result = await call_tool(client, tool, {"n": steps, "delay": STEP_DELAY}, token)
        got = [
            m for m in client.notifications
            if m.get("method") == "notifications/progress" and (m.get("params") or {}).get("progressToken") == token
        ]  # fmt: skip
        text = (result.get("content") or [{}])[0].get("text")
        if len(got) != steps or text != f"Counted to {steps}.":
            raise BenchError(f"{tool}: {len(got)} of {steps} progress, result {text!r}")

    return op


@dataclass
class Kind:
    name: str
    weight: int
    op: Callable[[McpClient, int], Awaitable[None]]
    make: Callable[[Server], McpClient] | None  # None: a fresh client and session per operation
    clients: int = 0  # pool size (both servers together); with make None, how many at once


def kinds() -> list[Kind]:
    """The mix: mostly calls on both wires, then streamed progress, background runs, whole sessions."""

    def legacy(s: Server) -> McpClient:
        return LegacyClient(HOST, s.port, s.path)

    def stateless(s: Server) -> McpClient:
        return StatelessClient(HOST, s.port, s.path)

    return [
        Kind("call legacy session", 40, echo, legacy, 48),
        Kind("call 2026-07-28", 40, echo, stateless, 48),
        Kind("call with progress (SSE)", 10, counting("count_slowly", PROGRESS_STEPS), legacy, 32),
        # A few: the worker (prefork, concurrency 2, as bin/serve starts it) runs two at a time, and on
        # a busy machine about 13 a second (a 2% share queued up at 700 operations a second).
        Kind("background run (worker)", 1, counting("count_in_background", BACKGROUND_STEPS), legacy, 24),
        Kind("whole session", 9, lambda c, n: c.list_tools(), None, 16),
    ]


@dataclass
class Tally:
    """What happened to every operation of one kind."""

    scheduled: int = 0  # due (the open loop started it)
    sent: int = 0  # had its client: its first request went out
    ok: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, str] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds from when it was due to its answer

    @property
    def lost(self) -> int:
        return sum(n for kind, n in self.errors.items() if kind in LOST)

    @property
    def wrong(self) -> int:
        return sum(n for kind, n in self.errors.items() if kind not in LOST)

    def fail(self, message: str, kind: str | None = None) -> None:
        kind = kind or error_kind(message)
        self.errors[kind] += 1
        self.examples.setdefault(kind, message[:300])


class Mix:
    """Client pools for every kind on both servers; `run` does one operation and counts it."""

    def __init__(self, servers: Sequence[Server], seed: int = 13) -> None:
        self.servers = servers
        self.kinds = kinds()
        self.rng = random.Random(seed)
        self.weights = [k.weight for k in self.kinds]
        self.pools: dict[str, asyncio.Queue[McpClient]] = {}
        self.all_clients: list[McpClient] = []
        self.tallies = {k.name: Tally() for k in self.kinds}
        self.next_server = itertools.cycle(servers)
        self.seq = itertools.count(1)
        self.in_flight: set[asyncio.Task[None]] = set()
        self.waiting: set[asyncio.Task[None] | None] = set()  # scheduled, still without a client
        self.fresh = {k.name: asyncio.Semaphore(k.clients) for k in self.kinds if k.make is None}
        self.latencies: list[float] = []  # of every kind, in the order answered (per-window figures)
        self.closed_duplicates = 0  # of the whole-session operations' clients, closed since

    async def open(self) -> None:
        """Create every pool's clients (legacy ones initialize a session), half on each server."""
        sem = asyncio.Semaphore(16)
        for kind in self.kinds:
            if kind.make is None:
                continue
            pool: asyncio.Queue[McpClient] = asyncio.Queue()
            clients = [kind.make(self.servers[i % len(self.servers)]) for i in range(kind.clients)]

            async def init(c: McpClient) -> None:
                async with sem:
                    await c.initialize()

            await asyncio.gather(*(init(c) for c in clients))
            for c in clients:
                pool.put_nowait(c)
            self.pools[kind.name] = pool
            self.all_clients += clients

    def reset(self) -> None:
        """Forget the counts so far (warm-up, the probe): the soak counts only its own."""
        self.tallies = {k.name: Tally() for k in self.kinds}
        self.latencies = []

    def pick(self) -> Kind:
        return self.rng.choices(self.kinds, self.weights)[0]

    async def run(self, kind: Kind, due: float) -> None:
        """One operation of `kind`, due at `due` (loop time): counted sent, then ok or an error."""
        tally = self.tallies[kind.name]
        tally.scheduled += 1
        task = asyncio.current_task()
        self.waiting.add(task)
        try:
            await self._one(kind, next(self.seq), tally, task)
        except BenchError as exc:
            tally.fail(str(exc))
            return
        except OSError as exc:  # connecting failed: nothing was answered
            tally.fail(f"connection closed: {type(exc).__name__}: {exc}")
            return
        except asyncio.CancelledError:
            if task in self.waiting:  # never sent: the backlog at the end
                self.waiting.discard(task)
            else:
                tally.fail("unfinished when the soak ended")
            raise
        tally.ok += 1
        latency = asyncio.get_running_loop().time() - due
        tally.latencies.append(latency)
        self.latencies.append(latency)

    async def _one(self, kind: Kind, n: int, tally: Tally, task: asyncio.Task[None] | None) -> None:
        pool = self.pools.get(kind.name)
        if pool is not None:
            client = await pool.get()
            self.waiting.discard(task)
            tally.sent += 1
            try:
                await kind.op(client, n)
            finally:
                pool.put_nowait(client)
            return
        async with self.fresh[kind.name]:
            self.waiting.discard(task)
            tally.sent += 1
            fresh = LegacyClient(HOST, next(self.next_server).port, self.servers[0].path)
            try:
                await fresh.initialize()
                await kind.op(fresh, n)
            finally:
                self.closed_duplicates += fresh.duplicates
                if fresh.session_id:
                    await fresh.delete_session()
                await fresh.close()

    def launch(self, kind: Kind, due: float) -> None:
        task = asyncio.create_task(self.run(kind, due))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def drain(self, timeout: float = REQUEST_TIMEOUT + 10) -> int:
        """Cancel the operations still waiting for a client (the backlog), then wait for those sent;
        cancel and count as lost those still unanswered after `timeout`. Returns the backlog."""
        backlog = [t for t in self.waiting if t is not None]
        for task in backlog:
            task.cancel()
        if backlog:
            await asyncio.wait(backlog, timeout=5)
        if not self.in_flight:
            return len(backlog)
        _done, pending = await asyncio.wait(set(self.in_flight), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        return len(backlog)

    @property
    def duplicates(self) -> int:
        return self.closed_duplicates + sum(getattr(c, "duplicates", 0) for c in self.all_clients)

    async def close(self) -> None:
        await asyncio.gather(
            *(c.delete_session() for c in self.all_clients if c.session_id), return_exceptions=True
        )
        await asyncio.gather(*(c.close() for c in self.all_clients), return_exceptions=True)

    def snapshot(self) -> dict[str, tuple[int, int, int]]:
        """scheduled, ok, errors per kind now (for per-window rates and what is in flight)."""
        return {name: (t.scheduled, t.ok, sum(t.errors.values())) for name, t in self.tallies.items()}


async def closed_loop(mix: Mix, concurrency: int, seconds: float) -> tuple[float, dict[str, float]]:
    """The mix's maximum rate, measured by `concurrency` loops each doing one operation after another.

    Returns that rate and each kind's answers per second. A kind that queues (background runs on a
    worker of two processes) finishes fewer than its share in a closed loop while the others race on,
    so the rate is the lowest of: all answers per second, and each kind's answers per second divided
    by its share of the mix (what an open loop at that rate would ask of it). Counts since `reset`.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def one() -> None:
        while loop.time() < end:
            await mix.run(mix.pick(), loop.time())

    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(concurrency)))
    elapsed = time.monotonic() - t0
    per_kind = {k.name: mix.tallies[k.name].ok / elapsed for k in mix.kinds}
    total_weight = sum(k.weight for k in mix.kinds)
    bound = min(sum(per_kind.values()), *(per_kind[k.name] * total_weight / k.weight for k in mix.kinds))
    return bound, per_kind


async def open_loop(mix: Mix, rate: float, seconds: float, on_tick: Callable[[], None] | None = None) -> None:
    """Start operations at `rate` per second for `seconds`, whatever the answers do (an open loop: a slow
    server gets the same arrivals, and the latency counts from when each operation was due)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in itertools.count():
        due = start + i / rate
        if due >= start + seconds:
            return
        if (wait := due - loop.time()) > 0:
            await asyncio.sleep(wait)
        mix.launch(mix.pick(), due)
        if on_tick is not None and i % 50 == 0:
            on_tick()


# ---------------------------------------------------------------------------------------------
# Held streams


class Streams:
    """`subscriptions/listen` and legacy GET streams held open on both servers; `churn` replaces the
    oldest of each kind; `check_edit` waits until every stream got a tools/list_changed."""

    def __init__(self, servers: Sequence[Server], per_server: int) -> None:
        self.servers, self.per_server = servers, per_server
        self.listens: collections.deque[ListenStream] = collections.deque()
        self.gets: collections.deque[tuple[GetStream, McpClient]] = collections.deque()
        self.tally = {"listen stream opened": Tally(), "GET stream opened": Tally()}
        self.dropped = Tally()  # a held stream that ended or failed before we closed it
        self.missed = Tally()  # a stream that got no tools/list_changed after an edit
        self.edits: list[dict[str, Any]] = []  # per edit: streams, told in time, seconds until all were
        self.turn = itertools.count()
        # Churn waits while an edit is checked: a stream closed meanwhile could not be told.
        self.lock = asyncio.Lock()

    async def open_listen(self, server: Server) -> None:
        tally = self.tally["listen stream opened"]
        tally.sent += 1
        stream = ListenStream(HOST, server.port, server.path, want_method=LIST_CHANGED)
        try:
            await stream.open()
            tally.ok += 1
            self.listens.append(stream)
        except (BenchError, OSError, TimeoutError) as exc:
            tally.fail(f"{type(exc).__name__}: {exc}")
            await stream.close()

    async def open_get(self, server: Server) -> None:
        tally = self.tally["GET stream opened"]
        tally.sent += 1
        client = LegacyClient(HOST, server.port, server.path)
        stream = GetStream(client, want_method=LIST_CHANGED)
        try:
            await client.initialize()
            await stream.open()
            tally.ok += 1
            self.gets.append((stream, client))
        except (BenchError, OSError, TimeoutError) as exc:
            tally.fail(f"{type(exc).__name__}: {exc}")
            await stream.close()
            await client.close()

    async def open(self) -> None:
        for server in self.servers:
            await asyncio.gather(*(self.open_listen(server) for _ in range(self.per_server)))
            await asyncio.gather(*(self.open_get(server) for _ in range(self.per_server)))

    def _check_alive(self, stream: ListenStream | GetStream) -> None:
        self.dropped.sent += 1
        if stream.error is None:
            self.dropped.ok += 1
        else:
            self.dropped.fail(f"held stream ended: {stream.error}", "stream ended early")

    async def churn(self) -> None:
        """Close the oldest stream of each kind (checking it was still alive) and open a new one."""
        async with self.lock:
            await self._churn()

    async def _churn(self) -> None:
        server = self.servers[next(self.turn) % len(self.servers)]
        if self.listens:
            old = self.listens.popleft()
            self._check_alive(old)
            await old.close()
        if self.gets:
            old_get, client = self.gets.popleft()
            self._check_alive(old_get)
            await old_get.close()
            await client.delete_session()
            await client.close()
        await asyncio.gather(self.open_listen(server), self.open_get(server))

    def _all(self) -> list[ListenStream | GetStream]:
        return [*self.listens, *(s for s, _ in self.gets)]

    async def check_edit(self, edit: Callable[[], Awaitable[None]], within: float = 10.0) -> None:
        """Run `edit` (a catalog change in another process); every held stream must be told within `within` s."""
        async with self.lock:
            await self._check_edit(edit, within)

    async def _check_edit(self, edit: Callable[[], Awaitable[None]], within: float) -> None:
        streams = self._all()
        before = {id(s): sum(1 for m in s.messages if m.get("method") == LIST_CHANGED) for s in streams}
        await edit()
        deadline = time.monotonic() + within
        waiting = streams
        while waiting and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            waiting = [
                s
                for s in waiting
                if sum(1 for m in s.messages if m.get("method") == LIST_CHANGED) <= before[id(s)]
            ]
        record: dict[str, Any] = {"streams": len(streams), "told": len(streams) - len(waiting)}
        record["seconds"] = None if waiting else round(time.monotonic() - (deadline - within), 3)
        self.missed.sent += len(streams)
        self.missed.ok += len(streams) - len(waiting)
        for _ in waiting:
            self.missed.fail(f"no {LIST_CHANGED} within {within:.0f} s of the edit", "notification missing")
        if waiting:  # late or never? (a diagnosis: either is counted as missing above)
            late_deadline = time.monotonic() + 2 * within
            while waiting and time.monotonic() < late_deadline:
                await asyncio.sleep(0.2)
                waiting = [
                    s
                    for s in waiting
                    if sum(1 for m in s.messages if m.get("method") == LIST_CHANGED) <= before[id(s)]
                ]
            record["told_late"] = record["streams"] - record["told"] - len(waiting)
        self.edits.append(record)

    async def close(self) -> None:
        for stream in self._all():
            self._check_alive(stream)
            await stream.close()
        for _stream, client in self.gets:
            await client.delete_session()
            await client.close()
