"""The checkout's local configuration, `.env` (AMB-297): what `./bin/serve` decided, for every entry point.

`bin/serve` chooses a few values the settings' production defaults never would (the demo's http tools post
to this platform on 127.0.0.1, so the SSRF guard must let that loopback through) and is handed others (the
database, Redis). Exported to Daphne alone, `manage.py check_tenant demo` disagreed with the admin's check
and `manage.py sync_upstreams` refused an upstream that Sync now reached. So `bin/serve` records them here
and `mcpsite/settings.py` loads the file in every process (the process's own environment still wins).

    python -m mcpsite.local_env exports FILE   # shell `export` lines for the keys FILE has and the
                                               # environment lacks (bin/serve's own decisions read them)
    python -m mcpsite.local_env record FILE    # write this environment's values of RECORDED into FILE

Runs before Django is set up: python-dotenv only.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from dotenv import dotenv_values, set_key

# What a checkout's processes must agree on. MCP_PUBLIC_URL follows bin/serve's PORT on every run, so it is
# recorded but never read back by `exports` (a stale port would win over the new one).
RECORDED = ("MCP_HTTP_HANDLER_ALLOW", "MCP_PUBLIC_URL", "DATABASE_URL", "REDIS_URL", "DATABASE_ROLE")
NOT_READ_BACK = frozenset({"MCP_PUBLIC_URL"})

HEADER = (
    "# This checkout's local configuration, written by ./bin/serve and read by every entry point of the\n"
    "# checkout (Daphne, manage.py commands, the Celery worker) through mcpsite/settings.py. The process\n"
    "# environment wins over it; edit or delete a line to change it (docs/operations.md).\n"
)


def exports(path: Path, environ: dict[str, str]) -> list[str]:
    """`export KEY=value` lines for what the file records and the environment does not set."""
    values = dotenv_values(path) if path.exists() else {}
    return [
        f"export {key}={shlex.quote(value)}"
        for key, value in values.items()
        if key in RECORDED and key not in NOT_READ_BACK and key not in environ and value is not None
    ]


def record(path: Path, environ: dict[str, str]) -> list[str]:
    """Write the environment's value of each RECORDED key that it sets; return the keys written."""
    if not path.exists():
        path.write_text(HEADER)
    written = []
    for key in RECORDED:
        if key in environ:
            set_key(path, key, environ[key], quote_mode="never" if _plain(environ[key]) else "always")
            written.append(key)
    return written


def _plain(value: str) -> bool:
    return value != "" and not any(c.isspace() or c in "\"'#$\\" for c in value)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in {"exports", "record"}:
        print("usage: python -m mcpsite.local_env (exports | record) FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    if argv[0] == "exports":
        print("\n".join(exports(path, dict(os.environ))))
    else:
        print(", ".join(record(path, dict(os.environ))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
