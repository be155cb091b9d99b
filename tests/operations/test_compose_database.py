"""compose.yaml's database set-up, run for real on PostgreSQL: the image's superuser creates the role
of deploy/postgres-init.sql, the platform migrates and seeds as that role (DATABASE_ROLE), and the
tenant wall binds it (AMB-96). Docker itself cannot run here; this is the part of compose that can.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import yaml
from psycopg import sql

from tests.e2e.servers import manage, require_services

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
INIT_SQL = (ROOT / "deploy" / "postgres-init.sql").read_text()


@pytest.fixture
def compose_database() -> Iterator[str]:
    """A new database made by a superuser, as the postgres image's POSTGRES_USER makes `mcp`."""
    require_services("runs compose's database initialisation on a real PostgreSQL", postgres=True)
    parts = urlsplit(os.environ["DATABASE_URL"])
    name = f"mcp_compose_{secrets.token_hex(4)}"
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(scheme="postgresql", path=f"/{name}"))
    finally:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_compose_migrates_and_serves_as_a_role_the_tenant_wall_binds(compose_database: str) -> None:
    role = COMPOSE["x-app"]["environment"]["DATABASE_ROLE"]
    with psycopg.connect(compose_database, autocommit=True) as conn:
        conn.execute(INIT_SQL)  # what the postgres image runs from /docker-entrypoint-initdb.d/
        conn.execute(INIT_SQL)  # and harmless again (a second database of the same cluster)
        bound = conn.execute(
            "SELECT NOT (rolsuper OR rolbypassrls) FROM pg_roles WHERE rolname = %s", [role]
        ).fetchone()
    assert bound == (True,)

    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(DATABASE_URL=compose_database, DATABASE_ROLE=role, DJANGO_SETTINGS_MODULE="mcpsite.settings")
    manage(env, "migrate", "--noinput")  # bin/entrypoint release's steps
    manage(env, "seed_demo")

    with psycopg.connect(compose_database, autocommit=True) as conn:
        owner = conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'mcp_app_tool'"
        ).fetchone()
        seeded = conn.execute("SELECT count(*) FROM mcp_app_tool").fetchone()[0]  # the superuser
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        unscoped = conn.execute("SELECT count(*) FROM mcp_app_tool").fetchone()[0]
        demo = conn.execute("SELECT id FROM tenants_tenant WHERE slug = 'demo'").fetchone()[0]
        conn.execute("SELECT set_config('mcp.tenants', %s, false)", [str(demo)])
        scoped = conn.execute("SELECT count(*) FROM mcp_app_tool").fetchone()[0]
        others = conn.execute("SELECT count(*) FROM mcp_app_tool WHERE tenant_id <> %s", [demo]).fetchone()[0]
    assert owner == (role,)
    assert seeded > scoped > 0  # the demo tenants have tools, and demo has some of them
    assert unscoped == 0 and others == 0
