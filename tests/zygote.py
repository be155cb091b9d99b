"""Test servers forked from one process that imported their libraries once, instead of started afresh.

The suite starts a real SDK upstream (tests/upstreams/servers.py) for a hundred-odd tests; each new
interpreter spent ~1 s of CPU importing the SDK, uvicorn and pydantic before it served, on a machine
whose cores the suite keeps busy. A zygote per test process imports a module's dependencies once
(`preload`) and forks a child per server, which runs the module as `python -m` would, its output in a
log file. The zygote is single-threaded and runs no event loop, so a fork of it is a clean process;
it is never used for the project's own servers (Django's settings are read at start-up, per process).

`spawn` returns a `Forked`, the part of `subprocess.Popen` the tests use (pid, poll, kill, wait,
returncode). The children are the zygote's, so it reaps them and reports their exit codes; it kills
those still running when its test process goes (its stdin closes).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 60.0

_zygotes: dict[str, subprocess.Popen[str]] = {}
_lock = threading.Lock()


class Forked:
    """A child of the zygote: as much of subprocess.Popen as the tests use."""

    def __init__(self, preload: str, pid: int) -> None:
        self.preload = preload
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = _ask(self.preload, {"op": "status", "pid": self.pid})["returncode"]
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # unreaped until the zygote is asked: the pid is still this child's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked {self.preload}", timeout or 0)
            time.sleep(0.02)
        return code


def spawn(
    module: str,
    args: list[str],
    env: dict[str, str],
    log_path: Path,
    *,
    preload: str | None = None,
    err_path: Path | None = None,
) -> Forked:
    """Run `python -m module *args` with `env`, its output appended to `log_path` (its errors to
    `err_path` when given), as a fork of the zygote that imported `preload` (default: `module`)."""
    preload = preload or module
    request = {
        "op": "spawn",
        "module": module,
        "args": args,
        "env": env,
        "log": str(log_path),
        "err": str(err_path or log_path),
    }
    return Forked(preload, _ask(preload, request)["pid"])


# Libraries only (Django's, the SDK's, ...): what `django.setup()` of the project imports, none of its settings.
CODE_PRELOAD = "tests.e2e.preload"


def run_code(code: str, env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`python -c code` with `env`, as subprocess.run(..., capture_output=True, text=True) returns it,
    but forked from a zygote that imported the project's libraries: a test that reads the settings in
    a fresh process (its exit code, its output) pays the settings and the apps, not ~2 s of CPU of
    imports each time (AMB-335)."""
    with tempfile.TemporaryDirectory(prefix="zygote-code-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        request = {"op": "spawn", "code": code, "env": env, "log": str(out), "err": str(err)}
        proc = Forked(CODE_PRELOAD, _ask(CODE_PRELOAD, request)["pid"])
        try:
            code_ = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        stdout = out.read_text() if out.exists() else ""
        stderr = err.read_text() if err.exists() else ""
    return subprocess.CompletedProcess(["python", "-c", code], code_, stdout, stderr)


def _ask(preload: str, request: dict[str, Any]) -> dict[str, Any]:
    with _lock:  # one request at a time per zygote; tests start servers from threads too
        zygote = _zygotes.get(preload)
        if zygote is None or zygote.poll() is not None:
            zygote = _zygotes[preload] = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote", preload],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            _read(zygote)  # {"ready": true} once its imports are done
        assert zygote.stdin is not None
        zygote.stdin.write(json.dumps(request) + "\n")
        zygote.stdin.flush()
        return _read(zygote)


def _read(zygote: subprocess.Popen[str]) -> dict[str, Any]:
    assert zygote.stdout is not None
    line = zygote.stdout.readline()
    if not line:
        raise RuntimeError(f"the test zygote exited ({zygote.poll()}); its errors are in the test output")
    return json.loads(line)


# --- the zygote's side ------------------------------------------------------------------------------


def _child(request: dict[str, Any]) -> NoReturn:
    """In the forked child: become `python -m module args` with the request's environment and log."""
    try:
        os.dup2(os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 1)
        os.dup2(os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(ROOT)
        random.seed()  # not the zygote's sequence, shared by every child
        if "code" in request:  # `python -c code`
            sys.argv = ["-c"]
            sys.path.insert(0, "")
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        else:
            sys.argv = [request["module"], *request["args"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    # Up through the zygote's loop and out: the interpreter's own exit runs what the module registered
    # with atexit (a server's last usage flush), as `python -m module` would.
    raise SystemExit(code)


def serve(preload: str) -> None:
    importlib.import_module(preload)  # what every child would import: once, here
    exited: dict[int, int] = {}
    children: set[int] = set()
    out = sys.stdout

    def reply(value: dict[str, Any]) -> None:
        out.write(json.dumps(value) + "\n")
        out.flush()

    reply({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(request)
            children.add(pid)
            reply({"pid": pid})
        elif request["op"] == "status":
            pid = request["pid"]
            if pid not in exited:
                with contextlib.suppress(ChildProcessError):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        exited[pid] = os.waitstatus_to_exitcode(status)
                        children.discard(pid)
            reply({"returncode": exited.get(pid)})
    for pid in children:  # the test process is gone: so are the servers it started
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1])
