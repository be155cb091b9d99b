"""What the tenant wall (row-level security, AMB-96) costs a SQL statement, wall on vs off, one process.

    .venv/bin/python bench/wall.py [--rounds 10] [--statements 400]

Prints figures; it is not a test. One scratch PostgreSQL database (DATABASE_URL's server, dropped
afterwards) with 20 tenants of 50 tools each, and two connections in this process: `off` is the
database's owner as a superuser (policies skipped), `on` takes a role without BYPASSRLS (`SET ROLE`,
as DATABASE_ROLE does), so every statement meets the policy. Both run the same Django ORM statements
through the same execute wrapper; slices alternate between them (this machine is noisy). Three
workloads: a tenant's enabled tools (the catalog load), one tool by primary key, and that lookup
while the scope changes before every statement (a thread serving another tenant each time: the
wrapper's `set_config` round trip). The warm MCP request path runs no SQL (tests/performance), so
this is the whole of the wall's cost there: on the statements that do run.
"""

from __future__ import annotations

import argparse
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
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres"
ROLE = "mcp_bench_wall"
TENANTS, TOOLS = 20, 50


def scratch_database(base: str) -> tuple[str, str]:
    parts = urlsplit(base)
    name = f"mcp_wall_bench_{secrets.token_hex(3)}"
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOSUPERUSER NOBYPASSRLS").format(sql.Identifier(ROLE)))
    return urlunsplit(parts._replace(path=f"/{name}")), maintenance


def configure(database_url: str) -> None:
    """Two aliases on one database: `off` as DATABASE_URL's user, `on` with SET ROLE to ROLE."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.pop("DATABASE_ROLE", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    from django.conf import settings  # noqa: PLC0415 - the environment above must be read first

    off = dict(settings.DATABASES["default"], CONN_MAX_AGE=None)
    on = dict(off, OPTIONS={**off.get("OPTIONS", {}), "assume_role": ROLE})
    settings.DATABASES.update(default=off, on=on)

    import django  # noqa: PLC0415

    django.setup()


def seed() -> list[tuple[int, list[int]]]:
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415

    from mcp_app.models import Tool  # noqa: PLC0415
    from tenants.models import Tenant  # noqa: PLC0415

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(sql.Identifier(ROLE)))
    layout = []
    for t in range(TENANTS):
        tenant = Tenant.objects.create(slug=f"wall-{t}", name=f"Wall {t}", auth_mode="public")
        Tool.objects.bulk_create(
            Tool(tenant=tenant, name=f"tool_{i}", handler="template", handler_config={"template": "x"})
            for i in range(TOOLS)
        )
        layout.append((tenant.pk, list(Tool.objects.filter(tenant=tenant).values_list("pk", flat=True))))
    return layout


def workloads(layout: list[tuple[int, list[int]]]) -> dict[str, Callable[[str, int], None]]:
    from mcp_app.models import Tool  # noqa: PLC0415
    from tenants import wall  # noqa: PLC0415

    tenant_id, tool_ids = layout[0]

    def catalog(alias: str, n: int) -> None:
        with wall.tenant(tenant_id):
            for _ in range(n):
                rows = list(Tool.objects.using(alias).filter(tenant_id=tenant_id, enabled=True).values_list("name"))
                assert len(rows) == TOOLS, rows

    def by_pk(alias: str, n: int) -> None:
        with wall.tenant(tenant_id):
            for i in range(n):
                Tool.objects.using(alias).filter(pk=tool_ids[i % TOOLS]).values_list("name").get()

    def switching(alias: str, n: int) -> None:
        for i in range(n):
            other, ids = layout[i % TENANTS]
            with wall.tenant(other):
                Tool.objects.using(alias).filter(pk=ids[i % TOOLS]).values_list("name").get()

    return {"catalog (50 rows)": catalog, "tool by pk": by_pk, "tool by pk, tenant changes each time": switching}


def measure(work: Callable[[str, int], None], rounds: int, statements: int) -> dict[str, list[float]]:
    """Microseconds per statement of each slice; the order of on/off flips each round."""
    per: dict[str, list[float]] = {"off": [], "on": []}
    for alias in ("off", "on"):
        work("default" if alias == "off" else "on", 20)  # connect and warm
    for rnd in range(rounds):
        for alias in ("off", "on") if rnd % 2 == 0 else ("on", "off"):
            started = time.perf_counter()
            work("default" if alias == "off" else "on", statements)
            per[alias].append((time.perf_counter() - started) / statements * 1e6)
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--statements", type=int, default=400)
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    if urlsplit(base).scheme not in {"postgres", "postgresql"}:
        sys.exit("bench/wall.py needs a PostgreSQL DATABASE_URL (the wall is PostgreSQL's)")
    database_url, maintenance = scratch_database(base)
    try:
        configure(database_url)
        from django.db import connections  # noqa: PLC0415

        from tenants import wall  # noqa: PLC0415

        wall.bypass_process("bench/wall.py seeds and reads every tenant")
        layout = seed()
        from mcp_app.models import Tool  # noqa: PLC0415

        with wall.tenant(layout[0][0]):  # the `on` connection really is bound by the wall, `off` is not
            assert Tool.objects.using("on").count() == TOOLS
            assert Tool.objects.using("default").count() == TENANTS * TOOLS
        print(f"## Tenant wall: µs per SQL statement, wall on vs off ({args.rounds} rounds x {args.statements})")
        print()
        print("| workload | off µs (median) | on µs (median) | on/off |")
        print("|---|---:|---:|---:|")
        for label, work in workloads(layout).items():
            per = measure(work, args.rounds, args.statements)
            off, on = statistics.median(per["off"]), statistics.median(per["on"])
            print(f"| {label} | {off:.0f} | {on:.0f} | {on / off:.2f}x |")
        connections.close_all()
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(urlsplit(database_url).path.lstrip("/"))
                )
            )


if __name__ == "__main__":
    main()
