"""Redis behind Sentinel for tests and benches (issue 35 §3): one primary, one replica, three sentinels.

All are `redis-server` processes of the harness's own on free ports of 127.0.0.1 (nothing is written
to disk: no RDB, no AOF). The sentinels watch the primary with a quorum of 2 and call it down after
`DOWN_MILLISECONDS` of silence; `kill_primary` SIGKILLs it, and `wait_for_failover` returns once the
sentinels name the replica. `url` is the REDIS_URL the platform takes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.fleet.pgbouncer import free_port

SERVICE = "mcp"
DOWN_MILLISECONDS = 1000
FAILOVER_TIMEOUT_MILLISECONDS = 5000
STARTUP_SECONDS = 15.0


def binary() -> str | None:
    return shutil.which("redis-server")


@dataclass
class SentinelRedis:
    folder: Path
    db: int = 0
    primary_port: int = field(default_factory=free_port)
    replica_port: int = field(default_factory=free_port)
    sentinel_ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/{self.db}"

    def start(self) -> SentinelRedis:
        found = binary()
        assert found, "redis-server is installed wherever the Redis service runs"
        self._redis(found, "primary", self.primary_port)
        self._redis(found, "replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port))
        self._wait(
            lambda: redis.Redis(port=self.replica_port).info("replication")["master_link_status"] == "up"
        )
        for index, port in enumerate(self.sentinel_ports):
            config = self.folder / f"sentinel-{index}.conf"
            # A sentinel rewrites its file as it learns: each gets its own.
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.folder}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_MILLISECONDS}\n"
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MILLISECONDS}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self.processes[f"sentinel-{index}"] = subprocess.Popen(
                [found, str(config), "--sentinel"],
                stdout=(self.folder / f"sentinel-{index}.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
        # Ready once every sentinel knows the replica and its two peers (a failover needs the quorum).
        self._wait(lambda: all(self._sentinel_ready(port) for port in self.sentinel_ports))
        return self

    def primary(self) -> tuple[str, int]:
        """The primary the sentinels name now."""
        for port in self.sentinel_ports:
            try:
                host, found = redis.Redis(
                    port=port, socket_timeout=1, decode_responses=True
                ).sentinel_get_master_addr_by_name(SERVICE)
                return str(host), int(found)
            except redis.exceptions.ConnectionError:
                continue
        raise RuntimeError("no sentinel answers")

    def kill_primary(self) -> int:
        """SIGKILL the current primary; returns its port."""
        _, port = self.primary()
        name = "primary" if port == self.primary_port else "replica"
        process = self.processes[name]
        process.kill()
        process.wait(10)
        return port

    def wait_for_failover(self, old_port: int, seconds: float = 30.0) -> float:
        """Seconds until the sentinels name a primary other than `old_port` that takes writes."""
        started = time.monotonic()

        def moved() -> bool:
            host, port = self.primary()
            if port == old_port:
                return False
            return redis.Redis(host=host, port=port, socket_timeout=1).info("replication")["role"] == "master"

        self._wait(moved, seconds)
        return time.monotonic() - started

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)
        self.processes.clear()

    def _redis(self, found: str, name: str, port: int, *extra: str) -> None:
        self.processes[name] = subprocess.Popen(
            [
                found,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                *extra,
            ],
            stdout=(self.folder / f"{name}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self._wait(lambda: redis.Redis(port=port, socket_timeout=1).ping())

    def _sentinel_ready(self, port: int) -> bool:
        master = redis.Redis(port=port, socket_timeout=1, decode_responses=True).sentinel_master(SERVICE)
        return int(master["num-slaves"]) >= 1 and int(master["num-other-sentinels"]) >= 2

    def _wait(self, ready: object, seconds: float = STARTUP_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if ready():  # type: ignore[operator]
                    return
            except (redis.exceptions.RedisError, KeyError, OSError) as failed:
                error = failed
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"Redis behind Sentinel did not get ready in {seconds} s (last: {error!r})")
