"""Governance events at a million rows (issue 34, AMB-355): what the table costs once a tenant has been
denied a million times, on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/governance_events.py [--rows 1000000]

Prints figures; it is not a test. A scratch database (made on DATABASE_URL's server, migrated here,
dropped at the end), a busy tenant with --rows events spread over 40 days (COPY, as fast as the
server takes them) and a quiet tenant with 100. Then, each the median of --rounds: the usage flush
writing a full batch (10,000 events, MAX_PENDING), the admin's first page and count for the quiet
tenant and for the busy one, and the nightly prune of what is older than 30 days (10,000 rows a
statement), with the table's bytes per row before and after.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE = os.environ.get("DATABASE_URL", "")
if urlsplit(BASE).scheme not in {"postgres", "postgresql"}:
    sys.exit("bench/governance_events.py needs DATABASE_URL of a PostgreSQL server (it makes its own database)")
NAME = f"mcp_bench_events_{secrets.token_hex(3)}"
PARTS = urlsplit(BASE)
MAINTENANCE = urlunsplit(PARTS._replace(scheme="postgresql", path="/postgres"))
os.environ.update(
    DJANGO_SETTINGS_MODULE="mcpsite.settings",
    DATABASE_URL=urlunsplit(PARTS._replace(path=f"/{NAME}")),
    DATABASE_ROLE="",
    REDIS_URL="",
    MCP_GOVERNANCE_EVENT_DAYS="30",
)

DAY = 86_400.0


def timed(action: Callable[[], object], rounds: int) -> tuple[float, object]:
    """The median seconds of `rounds` runs of `action`, and its last outcome."""
    taken, outcome = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        outcome = action()
        taken.append(time.perf_counter() - started)
    return statistics.median(taken), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with psycopg.connect(MAINTENANCE, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(NAME)))
    try:
        run(args.rows, args.rounds)
    finally:
        from django.db import connections  # noqa: PLC0415 - django is set up in run()

        connections.close_all()
        with psycopg.connect(MAINTENANCE, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(NAME)))


def run(rows: int, rounds: int) -> None:
    import django  # noqa: PLC0415 - after the settings are chosen

    from tenants import wall  # noqa: PLC0415

    wall.bypass_process("bench/governance_events.py")
    django.setup()
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415

    from mcp_app.governance import audit  # noqa: PLC0415
    from mcp_app.models import GovernanceEvent  # noqa: PLC0415
    from mcp_app.usage import flush  # noqa: PLC0415
    from tenants.models import Tenant  # noqa: PLC0415

    call_command("migrate", verbosity=0)
    busy = Tenant.objects.create(slug="busy", name="busy", auth_mode="public")
    quiet = Tenant.objects.create(slug="quiet", name="quiet", auth_mode="public")
    now = time.time()
    started = time.perf_counter()
    columns = ("tenant_id", "created_at", "kind", "rule", "target", "method", "caller", "detail")
    detail = json.dumps({"found": "e-mail address", "count": 2, "in": "result"})
    with connection.cursor() as cursor:
        copy_sql = f"COPY mcp_app_governanceevent ({', '.join(columns)}) FROM STDIN"
        with cursor.connection.cursor().copy(copy_sql) as copy:
            for i in range(rows):
                at = now - (i / rows) * 40 * DAY
                copy.write_row((busy.id, time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(at)), "denied",
                                "no-drops", f"tool_{i % 500}", "tools/call", f"user:{i % 97}", detail))  # fmt: skip
            for i in range(100):
                copy.write_row((quiet.id, time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(now - i * 60)),
                                "redacted", "mail", "echo", "tools/call", "user:1", detail))  # fmt: skip
        cursor.execute("ANALYZE mcp_app_governanceevent")
    loaded = time.perf_counter() - started
    print(f"{rows:,} events of one tenant and 100 of another, loaded by COPY in {loaded:.1f} s")

    def table_bytes() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size('mcp_app_governanceevent')")
            return int(cursor.fetchone()[0])

    size = table_bytes()
    print(f"table with its indexes: {size / 1e6:,.0f} MB, {size / (rows + 100):,.0f} bytes an event")

    batch = [
        audit.Event(now, busy.id, "blocked", "keys", "echo", "tools/call", "key:3", {"found": "GitHub Token", "count": 1})
        for _ in range(audit.MAX_PENDING)
    ]
    seconds, _ = timed(lambda: flush.write_governance(batch), rounds)
    print(f"the usage flush writing a full batch ({audit.MAX_PENDING:,} events): {seconds * 1000:,.0f} ms")

    for tenant in (quiet, busy):
        page = GovernanceEvent.objects.filter(tenant=tenant).order_by("-created_at", "-id")
        seconds, _ = timed(lambda page=page: list(page[:100]), rounds)
        counted, total = timed(lambda page=page: page.count(), rounds)
        print(f"the admin's first page for the {tenant.slug} tenant ({total:,} events): "
              f"{seconds * 1000:.1f} ms, its count {counted * 1000:.1f} ms")  # fmt: skip

    started = time.perf_counter()
    deleted = flush.prune_governance(time.time())
    pruned = time.perf_counter() - started
    print(f"the prune of events older than 30 days: {deleted:,} rows in {pruned:.1f} s "
          f"({pruned / max(1, deleted / 10_000) * 1000:,.0f} ms a statement of 10,000)")  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("VACUUM mcp_app_governanceevent")  # Django's autocommit: outside a transaction
    left = GovernanceEvent.objects.count()
    print(f"after it: {left:,} events, {table_bytes() / 1e6:,.0f} MB (space a VACUUM makes reusable, not returned)")
    buffer = io.StringIO()
    started = time.perf_counter()
    for event in GovernanceEvent.objects.filter(tenant=quiet).iterator(chunk_size=2_000):
        buffer.write(json.dumps({"at": event.created_at.isoformat(), "kind": event.kind}) + "\n")
    print(f"the quiet tenant's export read in {(time.perf_counter() - started) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
