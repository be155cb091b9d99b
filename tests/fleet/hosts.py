"""Hosts as Linux network namespaces behind HAProxy (issue 35 §1): a fleet on one machine.

`Fleet` makes N namespaces, each joined to this one by a veth pair of its own (/30 networks in one
10.231.x.0/24 the fleet picks), runs a Daphne in each on port 8000 and one HAProxy here: an HTTP front
on 127.0.0.1 doing round-robin over the hosts with health checks on `/health/ready`, and TCP relays on
each pair's near address to this machine's PostgreSQL and Redis, which listen on 127.0.0.1 only (inside
a namespace that address is the namespace's own). With `worker=True` one more namespace, outside the
balancer, runs a Celery worker: a machine of workers, which losing a web host leaves running. Traffic
stays inside what the fleet made; `close` kills every process of each namespace and deletes them.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from tests.fleet.pgbouncer import free_port

ROOT = Path(__file__).resolve().parents[2]
WEB_PORT = 8000
STARTUP_SECONDS = 60.0


def available() -> str | None:
    """Why a fleet cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "haproxy"):
        if not any(Path(d, tool).exists() for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin")):
            return f"needs {tool} (Debian's iproute2 and haproxy)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class Host:
    index: int
    namespace: str
    near: str  # this machine's end of the pair: where the host reaches PostgreSQL and Redis
    address: str  # the host's own end
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def kill(self) -> None:
        """Lose the host: SIGKILL every process in its namespace, as a machine that died."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    def served(self, needle: str) -> int:
        """How many lines of this host's access log hold `needle`."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return sum(needle in line for line in text.splitlines())


@dataclass
class Fleet:
    env: dict[str, str]
    folder: Path
    size: int = 3
    worker: bool = False  # one more namespace, outside the balancer, running a Celery worker
    hosts: list[Host] = field(default_factory=list)
    worker_host: Host | None = None
    port: int = 0
    haproxy: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mcp_url(self, slug: str = "demo") -> str:
        return f"{self.url}/t/{slug}/mcp"

    def open(self) -> Fleet:
        tag, net = secrets.token_hex(2), random.randint(0, 250)
        self.port = free_port()
        for i in range(self.size + self.worker):
            namespace, near, own = f"mcpf-{tag}-{i}", f"10.231.{net}.{4 * i + 1}", f"10.231.{net}.{4 * i + 2}"
            outside, inside = f"mf{tag}{i}o", f"mf{tag}{i}i"
            _ip("netns", "add", namespace)
            host = Host(i, namespace, near, own, self.folder / f"host-{i}.log")
            if i < self.size:
                self.hosts.append(host)
            else:
                self.worker_host = host
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", namespace)
            _ip("addr", "add", f"{near}/30", "dev", outside)
            _ip("link", "set", outside, "up")
            _ip("-n", namespace, "addr", "add", f"{own}/30", "dev", inside)
            _ip("-n", namespace, "link", "set", inside, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        self._start_haproxy()
        for host in self.hosts:
            self.start(host)
        for host in self.hosts:
            self.wait_ready(host)
        self.wait_balanced()
        if self.worker_host is not None:
            self.start_worker(self.worker_host)
        return self

    def _start_haproxy(self) -> None:
        database, redis = urlsplit(self.env["DATABASE_URL"]), urlsplit(self.env["REDIS_URL"])
        servers = "\n".join(
            f"    server h{h.index} {h.address}:{WEB_PORT} check inter 300 fall 2 rise 1" for h in self.hosts
        )
        relays = "".join(
            f"frontend {name}\n    mode tcp\n"
            + "".join(f"    bind {h.near}:{port}\n" for h in self.machines)
            + f"    default_backend {name}_here\nbackend {name}_here\n    mode tcp\n    server here {host}:{port}\n"
            for name, host, port in (
                ("postgres", database.hostname or "127.0.0.1", database.port or 5432),
                ("redis", redis.hostname or "127.0.0.1", redis.port or 6379),
            )
        )
        config = self.folder / "haproxy.cfg"
        config.write_text(
            "global\n    maxconn 4000\n"
            "defaults\n    timeout connect 2s\n    timeout client 600s\n    timeout server 600s\n"
            "    timeout tunnel 600s\n    timeout client-fin 5s\n"
            f"frontend web\n    mode http\n    bind 127.0.0.1:{self.port}\n    default_backend hosts\n"
            "backend hosts\n    mode http\n    balance roundrobin\n    option redispatch\n    retries 2\n"
            # Which host answered, for the tests: h0, h1, ...
            "    http-response set-header X-Fleet-Host %s\n"
            "    option httpchk\n    http-check send meth GET uri /health/ready ver HTTP/1.1 hdr Host 127.0.0.1\n"
            "    http-check expect status 200\n"
            f"{servers}\n{relays}"
        )
        log = (self.folder / "haproxy.log").open("ab")
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=log, stderr=log)
        time.sleep(0.3)
        if self.haproxy.poll() is not None:
            raise RuntimeError(
                f"haproxy exited {self.haproxy.returncode}:\n{(self.folder / 'haproxy.log').read_text()}"
            )

    @property
    def machines(self) -> list[Host]:
        """Every namespace: the web hosts and the workers' machine."""
        return [*self.hosts, *([self.worker_host] if self.worker_host else [])]

    def host_env(self, host: Host) -> dict[str, str]:
        """The environment of `host`'s processes: the services through its pair, the balancer's URL."""

        def through(url: str, port: int) -> str:
            parts = urlsplit(url)
            credentials = parts.netloc.rpartition("@")[0]
            where = f"{host.near}:{port}"
            return urlunsplit(parts._replace(netloc=f"{credentials}@{where}" if credentials else where))

        database, redis = urlsplit(self.env["DATABASE_URL"]), urlsplit(self.env["REDIS_URL"])
        return {
            **self.env,
            "DATABASE_URL": through(self.env["DATABASE_URL"], database.port or 5432),
            "REDIS_URL": through(self.env["REDIS_URL"], redis.port or 6379),
            "MCP_PUBLIC_URL": self.url,
            "MCP_BACKGROUND_TOOLS": self.env.get("MCP_BACKGROUND_TOOLS", "inline"),
        }

    def start(self, host: Host) -> None:
        command = [
            "ip", "netns", "exec", host.namespace,
            sys.executable, "-m", "daphne", "-b", host.address, "-p", str(WEB_PORT), "mcpsite.asgi:application",
        ]  # fmt: skip
        with host.log_path.open("ab") as log:
            host.proc = subprocess.Popen(
                command, cwd=ROOT, env=self.host_env(host), stdout=log, stderr=subprocess.STDOUT
            )

    def start_worker(self, host: Host) -> None:
        """A Celery worker in `host`'s namespace (the fleet's env must say MCP_BACKGROUND_TOOLS=celery)."""
        command = [
            "ip", "netns", "exec", host.namespace, sys.executable, "-m", "celery", "-A", "mcpsite", "worker",
            "--loglevel=INFO", "--concurrency=2", "--hostname", f"fleet-worker-{host.index}@%h",
            "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        with host.log_path.open("ab") as log:
            host.proc = subprocess.Popen(
                command, cwd=ROOT, env=self.host_env(host), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if host.proc.poll() is not None:
                raise RuntimeError(f"the worker exited {host.proc.returncode}:\n{host.log_path.read_text()}")
            if host.served(" ready.") > 0:
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"the worker was not ready within {STARTUP_SECONDS:.0f} s:\n{host.log_path.read_text()}"
        )

    def restart(self, host: Host) -> None:
        """Bring a lost host back (a new Daphne in its namespace) and wait until the balancer sends to it."""
        checked = host.served(f"{host.near}:")
        self.start(host)
        self.wait_ready(host)
        deadline = time.monotonic() + STARTUP_SECONDS
        while host.served(f"{host.near}:") <= checked:  # the balancer's health checks come from `near`
            if time.monotonic() > deadline:
                raise RuntimeError(f"the balancer did not check host {host.index} again")
            time.sleep(0.1)

    def wait_ready(self, host: Host) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert host.proc is not None
            if host.proc.poll() is not None:
                raise RuntimeError(
                    f"host {host.index} exited {host.proc.returncode}:\n{host.log_path.read_text()}"
                )
            out = subprocess.run(
                ["ip", "netns", "exec", host.namespace, sys.executable, "-c",
                 "import sys, urllib.request as u; sys.exit(u.urlopen(sys.argv[1], timeout=2).status != 200)",
                 f"http://{host.address}:{WEB_PORT}/health/ready"],
                capture_output=True,
            )  # fmt: skip
            if out.returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(
            f"host {host.index} not ready within {STARTUP_SECONDS:.0f} s:\n{host.log_path.read_text()}"
        )

    def wait_balanced(self, up: int | None = None) -> None:
        """Until the balancer's checks have every host (or `up` of them) up."""
        want = self.size if up is None else up
        deadline = time.monotonic() + STARTUP_SECONDS
        seen: set[int] = set()
        while time.monotonic() < deadline and len(seen) < want:
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{self.url}/health/live", timeout=2)
            seen = {h.index for h in self.hosts if h.served("/health/live") > 0}
            time.sleep(0.1)
        if len(seen) < want:
            raise RuntimeError(f"the balancer reached {len(seen)} of {want} hosts")

    def close(self) -> None:
        for host in self.machines:
            host.kill()
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
            subprocess.run(
                ["ip", "link", "del", f"mf{host.namespace.split('-')[1]}{host.index}o"], capture_output=True
            )
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            self.haproxy.wait(10)
