"""PgBouncer (Debian's package) in transaction pooling in front of the tests' PostgreSQL (issue 35 §2).

`start_pgbouncer` runs one on a free port of 127.0.0.1 for a database URL, with `pool` server connections
per database: every client's transactions share them, as in a deployment behind the pooler. Also a
command for `.ci/run`: `python -m tests.fleet.pgbouncer DATABASE_URL FOLDER [POOL]` starts one and prints
its URL for that database.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

STARTUP_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(path)), None
    )


@dataclass
class PgBouncer:
    port: int
    proc: subprocess.Popen[bytes]
    folder: Path

    def url(self, database_url: str) -> str:
        """`database_url` through this pooler (same user, database and password)."""
        parts = urlsplit(database_url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@127.0.0.1:{self.port}" if credentials else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_pgbouncer(database_url: str, folder: Path, pool: int = 1) -> PgBouncer:
    """PgBouncer in transaction mode for `database_url`'s server, `pool` server connections per database."""
    executable = binary()
    if executable is None:
        raise RuntimeError("pgbouncer is not installed (Debian's package: apt-get install pgbouncer)")
    parts = urlsplit(database_url)
    target = [f"host={parts.hostname or '127.0.0.1'}", f"port={parts.port or 5432}"]
    target.append(f"user={parts.username or 'postgres'}")
    if parts.password:
        target.append(f"password={parts.password}")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "pgbouncer.ini"
    # auth_type any: the tests' PostgreSQL trusts 127.0.0.1; the pooler logs in as the URL's user.
    # ignore_startup_parameters: what psycopg may send that PgBouncer would otherwise refuse.
    config.write_text(
        "[databases]\n"
        f"* = {' '.join(target)}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = any\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {pool}\n"
        "reserve_pool_size = 0\n"
        "max_client_conn = 2000\n"
        "max_db_connections = 0\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        "log_connections = 0\n"
        "log_disconnections = 0\n"
    )
    # PgBouncer refuses to run as root: as PostgreSQL's own user then. It reads its configuration before
    # dropping to that user, and logs to stderr: our file, opened here.
    command = [executable, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(config)]
    with (folder / "pgbouncer.log").open("ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    bouncer = PgBouncer(port=port, proc=proc, folder=folder)
    deadline = time.monotonic() + STARTUP_SECONDS
    probe = bouncer.url(urlunsplit(parts._replace(path="/postgres")))
    while True:
        try:
            with psycopg.connect(probe, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return bouncer
        except psycopg.Error as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                bouncer.stop()
                raise RuntimeError(f"pgbouncer did not start ({exc}):\n{bouncer.log()}") from exc
            time.sleep(0.1)


if __name__ == "__main__":
    url, where = sys.argv[1], Path(sys.argv[2])
    started = start_pgbouncer(url, where, int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    (where / "pgbouncer.pid").write_text(str(started.proc.pid))
    print(started.url(url))
