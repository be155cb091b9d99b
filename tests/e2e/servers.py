"""Real server processes for the end-to-end tests: Daphne and Celery started on 127.0.0.1, `manage.py` runs,
and the HTTP upstream the `fetch_json` tool posts to. The fixtures that use them are in conftest.py.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import zygote
from tests.e2e.helpers import Upstream

ROOT = Path(__file__).resolve().parents[2]
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = f"e2e-{secrets.token_urlsafe(12)}"
# Every secret a test used (passwords, tokens, keys, secret headers) and every server log written: the
# package's last teardown (conftest.py) reads each log for each secret (issue 13: logs never hold one).
SECRETS_USED: set[str] = {ADMIN_PASSWORD}
ALL_LOGS: list[Path] = []


def used_secret(value: str) -> str:
    """Remember `value` as a secret whose text must never reach a server's log; return it."""
    if len(value) >= 8:
        SECRETS_USED.add(value)
    return value


def secrets_in_logs() -> list[str]:
    """`file: n secret(s)` for each server log holding any used secret's text (never the secret)."""
    found = []
    for path in ALL_LOGS:
        text = path.read_text(errors="replace") if path.exists() else ""
        hits = sum(1 for secret in SECRETS_USED if secret in text)
        if hits:
            found.append(f"{path.name}: {hits} secret(s)")
    return found


STARTUP_SECONDS = 45.0
COMMAND_SECONDS = 180.0

# The processes running now (Daphne, Celery), for the failure report.
RUNNING: list[ServerProcess] = []
LOG_OFFSETS = pytest.StashKey[dict[str, int]]()


def require_services(reason: str, postgres: bool = False) -> None:
    """Skip a test that needs Redis (or, with postgres=True, PostgreSQL) when its URL is unset; fail it
    instead under MCP_E2E_REQUIRE_SERVICES=1, as CI runs."""
    if postgres:
        present, message = (
            os.environ.get("DATABASE_URL", "").startswith("postgres"),
            f"needs DATABASE_URL: {reason}",
        )
    else:
        present, message = bool(os.environ.get("REDIS_URL")), f"needs REDIS_URL: {reason}"
    if present:
        return
    if os.environ.get("MCP_E2E_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (MCP_E2E_REQUIRE_SERVICES=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(message)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The project's processes are forked from a zygote that imported their libraries once (tests/zygote.py):
# each new interpreter spent ~1.5 s of CPU on those imports, and the suite starts a few hundred.
PRELOAD = "tests.e2e.preload"


def manage(env: dict[str, str], *args: str, timeout: float = COMMAND_SECONDS) -> str:
    """Run `manage.py <args>` in a subprocess against the e2e database and return its stdout."""
    with tempfile.TemporaryDirectory(prefix="e2e-manage-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        proc = zygote.spawn("manage", list(args), env, out, preload=PRELOAD, err_path=err)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        stdout = out.read_text() if out.exists() else ""
        stderr = err.read_text() if err.exists() else ""
    if code != 0:
        raise RuntimeError(
            f"manage.py {' '.join(args)} exited {code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        )
    return stdout


class _Shell:
    """One long-lived shell process for one environment (tests/e2e/shell_server.py)."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.shell_server"],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
        )  # fmt: skip
        self.log_path = log_path
        self.reply(STARTUP_SECONDS)  # {"ready": true} once the project is imported

    def reply(self, seconds: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            log = self.log_path.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the e2e shell process gave no answer within {seconds:g} s\n--- its log\n{log}")
        return json.loads(line)

    def run(self, code: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"code": code}) + "\n")
        self.proc.stdin.flush()
        return self.reply(COMMAND_SECONDS)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


_SHELLS: dict[tuple[tuple[str, str], ...], _Shell] = {}
_SHELLS_LOCK = threading.Lock()


@atexit.register
def _stop_shells() -> None:
    for shell in _SHELLS.values():
        shell.stop()


def django_shell(env: dict[str, str], code: str) -> str:
    """Run Python code as `manage.py shell -c` would (in another process than any server); return its stdout.

    The process is kept per environment and runs one snippet after another: starting one per snippet
    cost ~3 s of CPU each. A snippet that raises raises RuntimeError here with its traceback.
    """
    key = tuple(sorted(env.items()))
    with _SHELLS_LOCK:  # one snippet at a time per process; tests call this from threads too
        shell = _SHELLS.get(key)
        if shell is None or shell.proc.poll() is not None:
            log_path = Path(tempfile.mkstemp(prefix="e2e-shell-", suffix=".log")[1])
            shell = _SHELLS[key] = _Shell(env, log_path)
        answer = shell.run(code)
    if not answer["ok"]:
        raise RuntimeError(f"manage.py shell -c exited 1\n--- stdout\n{answer['out']}\n--- stderr\n{answer['err']}")
    return answer["out"]


def counting_tenant(env: dict[str, str], prefix: str, **settings: int) -> str:
    """A public tenant of one test only (its slug returned), with `count` (count_slowly: progress as it
    counts) and `poke` (a template tool to edit); `settings` are Tenant fields such as max_streams."""
    slug = f"{prefix}-{secrets.token_hex(3)}"
    fields = "".join(f", {name}={value!r}" for name, value in settings.items())
    django_shell(
        env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public'{fields})\n"
        "Tool.objects.create(tenant=tenant, name='count', handler='python', handler_config={'callable': 'count_slowly'})\n"
        "Tool.objects.create(tenant=tenant, name='poke', handler='template', handler_config={'text': 'x'})\n",
    )
    return slug


@dataclass
class ServerProcess:
    """A process the tests started (Daphne, a Celery worker), with its output in a log file."""

    name: str
    proc: subprocess.Popen[bytes] | zygote.Forked
    log_path: Path

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def read_log(self, offset: int = 0) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self in RUNNING:
            RUNNING.remove(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class DaphneServer(ServerProcess):
    port: int = 0
    env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mcp_url(self, slug: str = "demo") -> str:
        return f"{self.url}/t/{slug}/mcp"


def start_celery_worker(name: str, env: dict[str, str], log_dir: Path) -> ServerProcess:
    """Start a Celery worker (what runs background tools) and return once it is ready."""
    log_path = log_dir / f"{name}.log"
    proc = zygote.spawn(
        "celery",
        [
            "-A", "mcpsite", "worker",
            "--loglevel=INFO", "--concurrency=2", "--hostname", f"{name}@%h",
            # Alone on its own queue: no need to look for, or gossip with, other workers.
            "--without-gossip", "--without-mingle",
        ],
        env,
        log_path,
        preload=PRELOAD,
    )  # fmt: skip
    worker = ServerProcess(name=name, proc=proc, log_path=log_path)
    RUNNING.append(worker)
    ALL_LOGS.append(log_path)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            worker.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode} at startup:\n{worker.read_log()}")
        if " ready." in worker.read_log():
            return worker
        time.sleep(0.1)
    worker.stop()
    raise RuntimeError(f"{name} was not ready within {STARTUP_SECONDS:.0f} s:\n{worker.read_log()}")


def start_daphne(
    name: str,
    env: dict[str, str],
    log_dir: Path,
    uvicorn: bool = False,
    proxy_headers: bool = False,
    public_host: str = "127.0.0.1",
) -> DaphneServer:
    """Start Daphne (or uvicorn with uvloop and httptools) on a free port; return once it serves the admin.
    `proxy_headers`: Daphne takes the client's address from X-Forwarded-For (MCP_PROXY_HEADERS=1).
    `public_host`: the host of its MCP_PUBLIC_URL (`localhost` keeps a browser's cookies for it apart from
    another server's on 127.0.0.1: cookies are per host, whatever the port)."""
    port = free_port()
    server_env = {**env, "MCP_PUBLIC_URL": f"http://{public_host}:{port}"}
    log_path = log_dir / f"{name}.log"
    if uvicorn:  # the documented alternative to Daphne (docs/operations.md)
        command = [
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
        ]
    else:
        command = ["daphne", "-b", "127.0.0.1", "-p", str(port)]
        if proxy_headers:  # as bin/entrypoint does under MCP_PROXY_HEADERS=1
            command.append("--proxy-headers")
    log_path.write_bytes(b"")
    proc = zygote.spawn(
        command[0], [*command[1:], "mcpsite.asgi:application"], server_env, log_path, preload=PRELOAD
    )
    server = DaphneServer(name=name, proc=proc, log_path=log_path, port=port, env=server_env)
    RUNNING.append(server)
    ALL_LOGS.append(log_path)
    deadline = time.monotonic() + STARTUP_SECONDS
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode} at startup:\n{server.read_log()}")
        try:
            response = httpx.get(f"{server.url}/admin/login/", timeout=2)
            if response.status_code == 200:
                return server
            last_error = f"HTTP {response.status_code}"
        except httpx.TransportError as exc:
            last_error = repr(exc)
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(
        f"{name} did not serve /admin/login/ within {STARTUP_SECONDS:.0f} s ({last_error}):\n{server.read_log()}"
    )


# --- the fetch_json tool's upstream -------------------------------------------------------


class EchoHandler(BaseHTTPRequestHandler):
    server: UpstreamHTTPServer

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.upstream.record(self.path, dict(self.headers), body)
        reply = self.server.upstream.reply_for(body)
        content_type = "application/json"
        if self.path == "/stream":
            reply = b'{"type": "progress", "progress": 1}\n{"type": "result", "upstream": "e2e"}\n'
            content_type = "application/x-ndjson"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the test output clean
        return


class UpstreamHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Upstream
