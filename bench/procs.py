"""The processes of a bench run: servers under test, Celery workers, the bench database, pinning.

Shared by `run.py` and the phases in modules of their own (`asking.py`), so every phase starts,
pins and stops its servers the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from loadgen import BenchError, McpClient, ModernClient

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HOST = "127.0.0.1"
STARTUP_TIMEOUT = 60.0


# ---------------------------------------------------------------------------------------------
# Processes


def log(msg: str) -> None:
    """Progress line on stderr, so stdout keeps only the figures."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Affinity:
    server: set[int] | None
    loadgen: set[int] | None
    note: str


def plan_affinity() -> Affinity:
    """Give the server the first allowed core and the load generator the others."""
    if not hasattr(os, "sched_getaffinity"):
        return Affinity(None, None, "no CPU pinning (sched_setaffinity unavailable)")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return Affinity(None, None, f"no CPU pinning (only {len(cores)} core available)")
    server, loadgen = {cores[0]}, set(cores[1:])
    os.sched_setaffinity(0, loadgen)
    return Affinity(
        server,
        loadgen,
        f"server pinned to core {cores[0]}, load generator to core(s) {','.join(map(str, sorted(loadgen)))} "
        "(os.sched_setaffinity); PostgreSQL and Redis are not pinned",
    )


LOCK_PATH = Path("/tmp/mcp-bench.lock")


def hold_bench_lock() -> object:
    """Wait (bounded) until no other bench run is going: two runs would drop each other's
    databases and load the same two cores. The lock lasts as long as the returned file is open."""
    f = open(LOCK_PATH, "w")  # noqa: SIM115 - kept open for the whole run
    deadline = time.monotonic() + 900
    waited = False
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    "another bench run has held /tmp/mcp-bench.lock for 15 minutes; giving up"
                ) from None
            if not waited:
                log("another bench run is in progress; waiting for it to finish")
                waited = True
            time.sleep(1)


def raise_fd_limit(want: int = 65536) -> int:
    """Raise the soft fd limit (children inherit it) and return the new value."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run_checked(cmd: list[str], env: dict[str, str], what: str, timeout: float = 600) -> str:
    """Run a setup command; stop the bench with its output if it fails."""
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(
            f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.stdout


class Server:
    """A server process under test, pinned to the server core."""

    def __init__(
        self, label: str, cmd: list[str], env: dict[str, str], port: int, path: str, cores: set[int] | None
    ):
        self.label, self.cmd, self.env, self.port, self.path, self.cores = label, cmd, env, port, path, cores
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(f"/tmp/mcp-bench-{label}-{port}.log")

    def start(self) -> None:
        cores = self.cores

        def pin() -> None:
            if cores:
                os.sched_setaffinity(0, cores)

        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=pin
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def wait_ready(self, wire: str = "legacy") -> None:
        """Wait until an initialize (on the modern wire: a server/discover) succeeds (bounded)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        last = "not started"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.label} exited with {self.proc.returncode}:\n{self.tail()}")
            client = (
                McpClient(HOST, self.port, self.path)
                if wire == "legacy"
                else ModernClient(HOST, self.port, self.path)
            )
            try:
                if wire == "legacy":
                    await client.initialize()
                    await client.delete_session()
                else:
                    await client.discover()
                await self.settle()
                return
            except (BenchError, OSError) as exc:
                last = str(exc)
            finally:
                await client.close()
            await asyncio.sleep(0.2)
        raise SystemExit(f"{self.label} not ready after {STARTUP_TIMEOUT}s: {last}\n{self.tail()}")

    async def settle(self, idle_share: float = 0.05, window: float = 0.5, bound: float = 20.0) -> None:
        """Wait (bounded) until the server and its children are idle: what a new process starts in the
        background (Daphne's template render forkserver boots Django, ~2 s of CPU on the server's own
        core, which its children inherit) must not be measured as the first phase's load."""
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            before = _tree_cpu_seconds(self.pid)
            await asyncio.sleep(window)
            if _tree_cpu_seconds(self.pid) - before < idle_share * window:
                return
        log(f"{self.label}: still busy after {bound:g}s; measuring anyway")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, sig_int: bool = False) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            t0 = time.monotonic()
            if sig_int:
                self.proc.send_signal(2)
            else:
                self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            if time.monotonic() - t0 > 2:  # a slow stop lengthens the run: say where the time went
                log(f"{self.label}: stopping took {time.monotonic() - t0:.1f}s")
        self._log.close()


def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by ``root`` and every live descendant (from /proc; Linux)."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, frontier = 0.0, [root]
    while frontier:
        pid = frontier.pop()
        total += used.get(pid, 0.0)
        frontier += [child for child, parent in parents.items() if parent == pid]
    return total


def with_db_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def recreate_database(url: str) -> None:
    """Drop and create the PostgreSQL database named in `url` (a fresh, known state)."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = with_db_name(url, "postgres").replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def django_env(database_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DJANGO_SETTINGS_MODULE="mcpsite.settings",
        DEBUG="0",
        PYTHONUNBUFFERED="1",
        # The per-session tool-call rate limit (TL-13) would cap one client at 1,200 calls a minute; the
        # reference has none, and this measures capacity, so it is off for the bench.
        MCP_TOOL_CALLS_PER_MINUTE="0",
        # Likewise the cap of sessions per client (AMB-100): every simulated client is 127.0.0.1.
        MCP_SESSIONS_PER_CLIENT="0",
    )
    return env


def forget_redis_versions(redis_url: str) -> None:
    """Delete the per-tenant version counters a previous bench database left in Redis.

    Tenant ids restart at 1 in a recreated database; a higher counter left over from an earlier
    run would never match the new rows' version and every request would miss the catalog cache.
    """
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match="mcp:*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def prepare_database(database_url: str, redis_url: str, seed: bool = True) -> dict[str, str]:
    """Create the database, migrate it and seed the demo tenant, each in a subprocess."""
    env = django_env(database_url, redis_url)
    recreate_database(database_url)
    forget_redis_versions(redis_url)
    run_checked([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], env, "migrate")
    # Apps without migration files yet get their tables from --run-syncdb; that step runs
    # before migrations, hence after a first plain migrate (a no-op once every app has them).
    run_checked(
        [PYTHON, "manage.py", "migrate", "--run-syncdb", "--noinput", "-v", "0"], env, "migrate --run-syncdb"
    )
    if seed:
        run_checked([PYTHON, "manage.py", "seed_demo"], env, "seed_demo")
    return env


def daphne_server(
    env: dict[str, str], cores: set[int] | None, label: str = "ours", profile: Path | None = None
) -> Server:
    port = free_port()
    # One process; Daphne writes no access log unless --access-log is given.
    cmd = [PYTHON]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += ["-m", "daphne", "-b", HOST, "-p", str(port), "-v", "0", "mcpsite.asgi:application"]
    env = dict(env, MCP_PUBLIC_URL=f"http://{HOST}:{port}")
    return Server(label, cmd, env, port, "/t/demo/mcp", cores)


def reference_server(
    json_response: bool, cores: set[int] | None, stateless: bool = False, extra_tools: int = 0
) -> Server:
    port = free_port()
    cmd = [PYTHON, str(ROOT / "bench" / "reference_server.py"), "--port", str(port)]
    if extra_tools:
        cmd += ["--extra-tools", str(extra_tools)]
    if json_response:
        cmd.append("--json-response")
    if stateless:
        cmd.append("--stateless")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    label = "ref-stateless" if stateless else "ref-json" if json_response else "ref-sse"
    return Server(label, cmd, env, port, "/mcp", cores)


def uvicorn_ours(env: dict[str, str], cores: set[int] | None) -> Server:
    """The same ASGI app as Daphne serves, on uvicorn with uvloop and httptools; one process."""
    port = free_port()
    cmd = [
        PYTHON, "-m", "uvicorn", "mcpsite.asgi:application", "--host", HOST, "--port", str(port),
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        # Channels' ProtocolTypeRouter serves no lifespan scope; "auto" would only log that.
        "--lifespan", "off",
    ]  # fmt: skip
    env = dict(env, MCP_PUBLIC_URL=f"http://{HOST}:{port}")
    return Server("ours-uvicorn", cmd, env, port, "/t/demo/mcp", cores)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------
# Celery workers


WORKER_POOL = os.environ.get("BENCH_WORKER_POOL", "--concurrency=2").split()


def celery_worker(
    env: dict[str, str],
    cores: set[int] | None,
    pool: Sequence[str] = WORKER_POOL,
    label: str = "worker",
    queue: str | None = None,
) -> Server:
    """The worker `bin/serve` starts (prefork, concurrency 2, unless `pool` says otherwise), pinned
    like the server. With `queue` it consumes only that queue and is named `worker_node(label)`, so
    several workers of one run stay apart (and `wait_workers_ready` can wait for this one)."""
    cmd = [PYTHON, "-m", "celery", "-A", "mcpsite", "worker", "--loglevel=WARNING", *pool]
    if queue is not None:
        cmd += ["-Q", queue, "--hostname", worker_node(label)]
    return Server(label, cmd, env, 0, "", cores)


def worker_node(label: str) -> str:
    """The Celery node name of the worker `celery_worker(..., label=label, queue=...)` starts."""
    return f"{label}@{socket.gethostname()}"


def wait_workers_ready(workers: Sequence[Server], nodes: Sequence[str] = ()) -> None:
    """Wait until the workers answer a ping (bounded); with `nodes`, until each of those node names
    has answered (one ping subprocess for all: each costs a Django start)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        for worker in workers:
            assert worker.proc is not None
            if worker.proc.poll() is not None:
                raise SystemExit(f"celery worker exited with {worker.proc.returncode}:\n{worker.tail()}")
        out = subprocess.run(
            [PYTHON, "-m", "celery", "-A", "mcpsite", "inspect", "ping", "--timeout", "1"],
            cwd=ROOT, env=workers[0].env, capture_output=True, text=True,
        )  # fmt: skip
        if (
            out.returncode == 0
            and "pong" in out.stdout
            and all(f"{node}: OK" in out.stdout for node in nodes)
        ):
            return
        time.sleep(0.5)
    raise SystemExit(f"celery workers not ready after {STARTUP_TIMEOUT}s:\n{workers[0].tail()}")
