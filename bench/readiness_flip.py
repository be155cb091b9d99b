"""How long /health/ready takes to flip when PostgreSQL or Redis goes away, and to come back (issue 13).

    .venv/bin/python bench/readiness_flip.py              # 5 outages of each, about 2 minutes
    .venv/bin/python bench/readiness_flip.py --repeats 3 --only redis

One Daphne process on a PostgreSQL cluster and a redis-server of this script's own (initdb and pg_ctl
into a temporary directory, as the `postgres` user when run as root; each on a free port), so the
shared services are never touched. /health/ready?format=json is polled every --interval (50 ms), each
poll a request of its own, on one keep-alive connection pool. Per outage: the service is stopped at
once (PostgreSQL: `pg_ctl stop -m immediate`, every backend gone without a checkpoint, as in a crash;
Redis: SIGKILL), and the time is taken from then to the first 503 answer; then it is started again on
the same port, and the time is taken from when it accepts connections again (pg_ctl -w / a PING) to the
first 200. Background tools run inline (no worker), so only the two services are looked at.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import HOST, daphne_server, free_port, log, prepare_database  # noqa: E402

UP_SECONDS = 60.0


def pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise SystemExit(f"no {name} under /usr/lib/postgresql/*/bin")
    return str(found[-1])


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary directory on a free port, started and stopped with pg_ctl."""

    def __init__(self, root: Path) -> None:
        self.dir, self.port = root / "pg", free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.dir.mkdir()
        if self.as_user:  # initdb refuses to run as root
            shutil.chown(root, "postgres")
            shutil.chown(self.dir, "postgres")
        self._run(pg_bin("initdb"), "-D", str(self.dir), "-A", "trust", "-U", "postgres", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgres://postgres@{HOST}:{self.port}/mcp"

    def _run(self, *cmd: str) -> None:
        proc = subprocess.run([*self.as_user, *cmd], capture_output=True, text=True, timeout=UP_SECONDS)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses={HOST} -c fsync=off"
        self._run(
            pg_bin("pg_ctl"), "-D", str(self.dir), "-o", options, "-l", str(self.dir / "log"), "-w", "start"
        )

    def stop(self, mode: str = "immediate") -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.dir), "-m", mode, "-w", "stop")


class PrivateRedis:
    """A redis-server on a free port, no persistence; killed with SIGKILL."""

    def __init__(self, root: Path) -> None:
        self.dir, self.port = root, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + UP_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.exceptions.ConnectionError):
                redis.Redis(host=HOST, port=self.port, socket_timeout=1).ping()
                return
            time.sleep(0.01)
        raise SystemExit("the private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@dataclass
class Poller:
    """Polls readiness every `interval` seconds, each poll a task of its own; keeps (answered at, status)."""

    url: str
    interval: float
    answers: list[tuple[float, int]] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)  # status: the first body seen with it

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=10.0) as client:
            tasks: set[asyncio.Task[None]] = set()
            try:
                while True:
                    task = asyncio.create_task(self._poll(client))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    await asyncio.sleep(self.interval)
            finally:
                for task in tasks:
                    task.cancel()

    async def _poll(self, client: httpx.AsyncClient) -> None:
        try:
            resp = await client.get(self.url, headers={"accept": "application/json"})
        except httpx.HTTPError:
            self.answers.append((time.monotonic(), 0))
            return
        self.answers.append((time.monotonic(), resp.status_code))
        self.reasons.setdefault(resp.status_code, resp.text[:300])

    async def first(self, status: int, after: float, timeout: float = UP_SECONDS) -> float:
        """Seconds from `after` to the first answer with `status` answered after it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, got in self.answers:
                if at >= after and got == status:
                    return at - after
            await asyncio.sleep(0.005)
        raise SystemExit(f"no {status} within {timeout:.0f}s")

    async def steady(self, status: int, seconds: float = 1.0, timeout: float = 30.0) -> None:
        """Wait until every answer for `seconds` had `status`; stop the run, saying what came, if none
        does within `timeout` (readiness that flaps is a finding, not something to wait out)."""
        deadline = time.monotonic() + timeout
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(seconds)
            if all(got == status for at, got in self.answers if at >= t0):
                return
            if time.monotonic() > deadline:
                seen = collections.Counter(got for at, got in self.answers if at >= deadline - timeout)
                raise Flapping(f"not steadily {status} for {timeout:.0f}s: answers {dict(seen)}")


class Flapping(Exception):
    """Readiness did not settle."""


@dataclass
class Outage:
    down: float  # seconds from the stop command to the first 503
    stop: float  # how long the stop command took (pg_ctl returns once the server is gone)
    up: float  # seconds from the service accepting connections again to the first 200
    restart: float  # how long the service itself took to start


async def outage(poller: Poller, stop: Callable[[], None], start: Callable[[], None]) -> Outage:
    await poller.steady(200)
    t0 = time.monotonic()
    await asyncio.to_thread(stop)
    stopped = time.monotonic()
    down = await poller.first(503, t0)
    await poller.steady(503, 0.5)
    t1 = time.monotonic()
    await asyncio.to_thread(start)
    started = time.monotonic()
    up = await poller.first(200, started)
    return Outage(down, stopped - t0, up, started - t1)


def stats_ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{min(ms):.0f} / {statistics.median(ms):.0f} / {max(ms):.0f}"


async def measure(
    args: argparse.Namespace, pg: PrivatePostgres, rds: PrivateRedis
) -> dict[str, list[Outage]]:
    env = prepare_database(pg.url, rds.url)
    env.update(MCP_BACKGROUND_TOOLS="inline")
    server = daphne_server(env, None, label="readiness")
    server.start()
    try:
        await server.wait_ready()
        poller = Poller(f"http://{HOST}:{server.port}/health/ready?format=json", args.interval)
        polling = asyncio.create_task(poller.run())
        results: dict[str, list[Outage]] = {}
        flapped: list[str] = []
        services: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
            "PostgreSQL": (pg.stop, pg.start),
            "Redis": (rds.stop, rds.start),
        }
        for name, (stop, start) in services.items():
            if args.only and args.only.lower() not in name.lower():
                continue
            for i in range(args.repeats):
                try:
                    result = await outage(poller, stop, start)
                except Flapping as exc:
                    log(f"readiness: {name} outage {i + 1}: {exc}")
                    print_reasons(poller)
                    flapped.append(f"{name}, after outage {i}: {exc}")
                    break
                log(
                    f"readiness: {name} outage {i + 1}: 503 after {result.down * 1000:.0f} ms, 200 after {result.up * 1000:.0f} ms"
                )
                results.setdefault(name, []).append(result)
        print_reasons(poller)
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
        for line in flapped:
            print(f"- readiness did not settle: {line}")
        return results
    finally:
        server.stop()


def print_reasons(poller: Poller) -> None:
    for status, body in sorted(poller.reasons.items()):
        log(f"readiness: a {status} answer: {body}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--interval", type=float, default=0.05, help="seconds between polls (default 0.05)")
    p.add_argument("--only", choices=["postgres", "redis"])
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-readiness-") as tmp:
        root = Path(tmp)
        pg, rds = PrivatePostgres(root), PrivateRedis(root)
        pg.start()
        rds.start()
        try:
            results = asyncio.run(measure(args, pg, rds))
        finally:
            rds.stop()
            with contextlib.suppress(SystemExit):
                pg.stop("fast")
    print(
        f"# Readiness flip: `bench/readiness_flip.py {' '.join(sys.argv[1:])}` ({time.strftime('%Y-%m-%d %H:%M')})\n"
    )
    print(
        f"Polling /health/ready every {args.interval * 1000:.0f} ms; min / median / max in ms over each run of outages.\n"
    )
    print(
        "| service gone | outages | stop -> first 503 | the stop itself | back -> first 200 | the restart itself |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        print(
            f"| {name} | {len(runs)} | {stats_ms([r.down for r in runs])} | {stats_ms([r.stop for r in runs])} "
            f"| {stats_ms([r.up for r in runs])} | {stats_ms([r.restart for r in runs])} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
