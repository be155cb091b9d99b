"""One local configuration per checkout (AMB-297) and bin/serve's set-up that skips what has nothing to do (AMB-298).

`./bin/serve` records what it decides in `.env` (`python -m mcpsite.local_env record`), and every entry point
reads it through the settings: after it, the README's own `manage.py check_tenant demo` agrees with the
server (the demo's http tools post to 127.0.0.1, which only that file allows).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from mcpsite import local_env

ROOT = Path(settings.BASE_DIR)


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_record_writes_what_the_environment_sets_and_exports_reads_back_only_what_it_lacks(tmp_path):
    path = tmp_path / ".env"
    written = local_env.record(
        path,
        {"MCP_HTTP_HANDLER_ALLOW": "127.0.0.1", "MCP_PUBLIC_URL": "http://127.0.0.1:8123", "HOME": "/x"},
    )
    assert written == ["MCP_HTTP_HANDLER_ALLOW", "MCP_PUBLIC_URL"]
    assert "HOME" not in path.read_text() and path.read_text().startswith("# This checkout's")
    # The port's URL follows each run's PORT: never read back; what the environment sets wins.
    assert local_env.exports(path, {}) == ["export MCP_HTTP_HANDLER_ALLOW=127.0.0.1"]
    assert local_env.exports(path, {"MCP_HTTP_HANDLER_ALLOW": ""}) == []
    # A value set empty (refuse loopback) is kept as empty, and a later run changes it in place.
    local_env.record(path, {"MCP_HTTP_HANDLER_ALLOW": "", "DATABASE_URL": "postgres://u@h:5432/db name"})
    assert local_env.exports(path, {}) == [
        "export MCP_HTTP_HANDLER_ALLOW=''",
        "export DATABASE_URL='postgres://u@h:5432/db name'",
    ]
    assert path.read_text().count("MCP_HTTP_HANDLER_ALLOW") == 1


def test_after_serve_setup_manage_py_sees_what_the_server_sees(tmp_path):
    """serve_setup migrates, collects and seeds, then skips what has nothing to do; `check_tenant demo`
    exits 0 with the recorded .env and names the loopback tools without it; SQLite has no wall to mention."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DATABASE_ROLE")}
    env_file = tmp_path / ".env"
    env.update(
        MCP_ENV_FILE=str(env_file),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STATIC_ROOT=str(tmp_path / "static"),
        DJANGO_SETTINGS_MODULE="mcpsite.settings",
    )
    record = run(
        ["-m", "mcpsite.local_env", "record", str(env_file)], {**env, "MCP_HTTP_HANDLER_ALLOW": "127.0.0.1"}
    )
    assert record.returncode == 0 and "MCP_HTTP_HANDLER_ALLOW" in record.stdout, record.stderr

    first = run(["manage.py", "serve_setup"], env)
    assert first.returncode == 0, first.stderr
    assert "migrate: applying" in first.stdout and "collectstatic: collecting" in first.stdout
    assert "Demo tenant 'demo'" in first.stdout
    again = run(["manage.py", "serve_setup"], env)
    assert again.returncode == 0, again.stderr
    assert "migrate: skipped, the database is up to date" in again.stdout
    assert "collectstatic: skipped, no static file changed" in again.stdout

    checked = run(["manage.py", "check_tenant", "demo"], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "tenant wall bypassed" not in checked.stdout + checked.stderr  # SQLite: there is no wall
    without = run(["manage.py", "check_tenant", "demo"], {**env, "MCP_ENV_FILE": ""})
    assert without.returncode == 1 and "fetch_json" in without.stderr, without.stdout + without.stderr
