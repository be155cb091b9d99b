"""The Procfile, run as a process manager runs it (honcho): its release step, then two web processes and
a worker on the real PostgreSQL and Redis; the official SDK client is served by both web processes and a
background tool runs on the worker; SIGTERM stops every process cleanly (docs/operations.md, AMB-93).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import ALL_LOGS, ROOT, STARTUP_SECONDS, free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="the Procfile's worker needs the Redis broker and the processes PostgreSQL"),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

HONCHO = [sys.executable, "-m", "honcho", "--procfile", str(ROOT / "Procfile"), "--app-root", str(ROOT)]
# honcho sends SIGKILL 5 s after SIGTERM; an idle Daphne and Celery must be gone well before.
STOP_SECONDS = 15.0


def two_free_ports() -> int:
    """A base port whose successor is free too (honcho numbers web.1 and web.2 from the base)."""
    for _ in range(50):
        base = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


def lines_of(log: Path, process: str) -> list[str]:
    """What one Procfile process (`web.1`, `worker.1`, `system`) wrote, from honcho's prefixed output."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [
        line.split("| ", 1)[1]
        for line in text.splitlines()
        if re.match(rf"^\S+ {re.escape(process)}\s+\|", line)
    ]


def worker_finished(log: Path, tool: str) -> bool:
    """Whether the Procfile's worker logged the end of a job of this tool."""
    return any(f"(tool {tool}) finished" in line for line in lines_of(log, "worker.1"))


@pytest.fixture
def procfile_env(e2e_env: dict[str, str]) -> dict[str, str]:
    """The e2e environment, with a queue no other worker of this run takes and Daphne on loopback only."""
    return {
        **e2e_env,
        "MCP_BIND": "127.0.0.1",
        "MCP_BACKGROUND_QUEUE": f"{e2e_env['MCP_BACKGROUND_QUEUE']}-procfile",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@pytest.fixture
def honcho_log(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "honcho.log"
    ALL_LOGS.append(log)  # the package's teardown reads every server log for the tests' secrets
    yield log


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


async def test_the_procfile_runs_two_web_processes_and_a_worker_that_serve_mcp_and_stop_cleanly_on_sigterm(
    procfile_env: dict[str, str], honcho_log: Path
) -> None:
    release = subprocess.run(
        [*HONCHO, "start", "release"],
        cwd=ROOT, env=procfile_env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert release.returncode == 0, release.stdout + release.stderr
    assert "No migrations to apply." in release.stdout, release.stdout

    base = two_free_ports()
    env = {**procfile_env, "MCP_PUBLIC_URL": f"http://127.0.0.1:{base}"}  # one public URL for both processes
    with honcho_log.open("wb") as out:
        honcho = subprocess.Popen(
            [*HONCHO, "start", "--port", str(base), "--concurrency", "web=2,worker=1", "web", "worker"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        # Ready means the database, Redis, the channel layer and a worker's ping all answer this process.
        while not (ready(base) and ready(base + 1)):
            assert honcho.poll() is None, honcho_log.read_text()
            assert time.monotonic() < deadline, (
                f"not ready within {STARTUP_SECONDS:.0f} s:\n{honcho_log.read_text()}"
            )
            time.sleep(0.2)

        async with mcp_client(f"http://127.0.0.1:{base + 1}/t/demo/mcp") as client:
            echoed = await client.call_tool("echo", {"message": "through web.2"})
        assert not echoed.is_error, echoed
        assert "through web.2" in echoed.content[0].text
        async with mcp_client(f"http://127.0.0.1:{base}/t/demo/mcp") as client:
            counted = await client.call_tool("count_in_background", {"n": 3, "delay": 0.05})
        assert not counted.is_error, counted
        assert counted.structured_content == {"count": 3}
        # The worker logs the job's end after it has published the result the client already holds, and
        # honcho relays that line on its own schedule: wait for it rather than read the log once.
        deadline = time.monotonic() + 10.0
        while not worker_finished(honcho_log, "count_in_background"):
            assert time.monotonic() < deadline, f"the Procfile's worker did not run the job:\n{honcho_log.read_text()}"
            time.sleep(0.1)

        honcho.send_signal(signal.SIGTERM)
        honcho.wait(timeout=STOP_SECONDS)
    finally:
        if honcho.poll() is None:
            os.killpg(honcho.pid, signal.SIGKILL)
            honcho.wait(timeout=10)
    system = "\n".join(lines_of(honcho_log, "system"))
    assert "SIGKILL" not in system, honcho_log.read_text()
    # Each process got the signal itself (the Procfile's `exec` and bin/entrypoint's leave no shell in
    # between) and exited with 0: Daphne after draining, Celery after its warm shutdown.
    for process in ("web.1", "web.2", "worker.1"):
        assert f"{process} stopped (rc=0)" in system, honcho_log.read_text()
    for process in ("web.1", "web.2"):
        assert any(line.startswith("draining:") for line in lines_of(honcho_log, process)), (
            honcho_log.read_text()
        )
    assert "Warm shutdown" in "\n".join(lines_of(honcho_log, "worker.1")), honcho_log.read_text()
