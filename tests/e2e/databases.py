"""The e2e servers' PostgreSQL databases, cloned from one migrated template instead of migrated each.

Each test worker's e2e package ran every migration on a fresh database (~9 s of CPU, mostly Django
rendering the migration states). The template is named by a digest of every installed app's migration
files and the role that owns it, built once by whichever worker needs it first (an advisory lock
orders them) and kept between runs; `CREATE DATABASE … TEMPLATE` copies it in a fraction of a second.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import SplitResult, urlunsplit

import psycopg
from django.apps import apps
from psycopg import sql

from tests.e2e.servers import manage

LOCK = 0x6D63_7065  # pg_advisory_lock key of the template's building ("mcpe")


def migrations_digest(role: str) -> str:
    """What the template's schema depends on: every installed app's migration files, and its owner."""
    digest = hashlib.sha256(role.encode())
    for config in sorted(apps.get_app_configs(), key=lambda c: c.label):
        folder = Path(config.path) / "migrations"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
            digest.update(f"{config.label}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def migrated_template(parts: SplitResult, role: str | None) -> str:
    """The name of the migrated template database (owned by `role`), built first if it is not there."""
    template = f"mcp_e2e_tpl_{migrations_digest(role or '')}"
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
        try:
            _build(conn, parts, template, role)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
    return template


def _build(conn: psycopg.Connection, parts: SplitResult, template: str, role: str | None) -> None:
    """Build `template` by migrating a database of that name's own, unless it is there (under LOCK)."""
    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,)).fetchone() is not None:
        return
    owner = sql.SQL(" OWNER {}").format(sql.Identifier(role)) if role else sql.SQL("")
    building = f"{template}_building"
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)) + owner)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        DJANGO_SETTINGS_MODULE="mcpsite.settings",
        DATABASE_URL=urlunsplit(parts._replace(path=f"/{building}")),
    )
    manage(env, "migrate", "--noinput")
    # Renamed once whole: a worker that died half-way leaves only a `_building` one.
    conn.execute(
        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(template))
    )


def clone_migrated(parts: SplitResult, name: str, role: str | None) -> None:
    """Create database `name` (owned by `role`) as a copy of the migrated template, building it if needed."""
    template = f"mcp_e2e_tpl_{migrations_digest(role or '')}"
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    owner = sql.SQL(" OWNER {}").format(sql.Identifier(role)) if role else sql.SQL("")
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
        try:
            _build(conn, parts, template, role)
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
                + owner
            )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
