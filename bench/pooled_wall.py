"""The tenant wall per transaction through PgBouncer against the session wall direct (AMB-365): the cost
of one ORM statement of its own (autocommit), the platform's commonest.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcp_bench_processes .venv/bin/python bench/pooled_wall.py

Prints figures; it is not a test. DATABASE_URL names a migrated database with the demo tenant (what
`bench/processes.py` or `bench/connections.py` leave). Each process runs 1,000 lookups of one tool by
name in the demo tenant's scope, five times, and prints the median per statement: the session wall
straight to PostgreSQL; through PgBouncer (transaction mode) with the settings, the statement and the
COMMIT in one query; and through PgBouncer with them in three round trips (the path of a cursor that
binds server-side).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUNDS, STATEMENTS = 5, 1_000


def measure(three_round_trips: bool) -> float:
    import django  # noqa: PLC0415 - the child process's settings come from its environment

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    django.setup()
    from mcp_app.models import Tool  # noqa: PLC0415
    from tenants import wall  # noqa: PLC0415
    from tenants.models import Tenant  # noqa: PLC0415

    wall.bypass_process("bench")
    tenant = Tenant.objects.get(slug="demo").id
    if three_round_trips:
        real = wall._align_per_transaction

        def without_one_query(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            return real(execute, sql, params, many, {**context, "cursor": None})

        wall._align_per_transaction = without_one_query
    taken = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        with wall.tenant(tenant):
            for _ in range(STATEMENTS):
                Tool.objects.filter(tenant_id=tenant, name="echo").first()
        taken.append((time.perf_counter() - started) / STATEMENTS)
    return statistics.median(taken) * 1e6


def child(env: dict[str, str], mode: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from tests.fleet.pgbouncer import start_pgbouncer  # noqa: PLC0415

    url = os.environ["DATABASE_URL"]
    base = {**os.environ, "REDIS_URL": "", "DATABASE_ROLE": ""}
    with tempfile.TemporaryDirectory(prefix="mcp-bench-pooled-wall-") as folder:
        bouncer = start_pgbouncer(url, Path(folder), pool=2)
        try:
            pooled = {**base, "DATABASE_URL": bouncer.url(url), "DATABASE_POOLING": "transaction"}
            figures = {
                "session wall, direct": child({**base, "DATABASE_POOLING": "session"}, "one"),
                "per transaction, PgBouncer, one query": child(pooled, "one"),
                "per transaction, PgBouncer, three round trips": child(pooled, "three"),
            }
        finally:
            bouncer.stop()
    direct = figures["session wall, direct"]
    print(f"\nOne ORM statement of its own, median of {ROUNDS} x {STATEMENTS}")
    for label, micros in figures.items():
        print(f"  {label:48} {micros:7.1f} µs  {micros / direct:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(measure(sys.argv[2] == "three"))
    else:
        main()
