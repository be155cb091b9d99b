"""What `./bin/serve` does before it serves, in one process, skipping each step that has nothing to do.

Three commands each paid Django's start-up and did their work whether needed or not (70 s for a warm
`./bin/serve` on a busy machine). Here: migrate only when a migration is unapplied, collect static files
only when a source file changed since the last collection (a fingerprint of paths, sizes and times kept
in STATIC_ROOT), and seed the demo tenants always (it costs half a second and prints the logins, AMB-236).
One line per step says what was done or why it was skipped (docs/operations.md, AMB-298).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

STAMP = ".mcp-static-fingerprint"


def unapplied_migrations() -> int:
    """How many migrations `migrate` would apply now."""
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def static_fingerprint() -> str:
    """What collectstatic would copy: each source file's path, size and modification time, and the target."""
    digest = hashlib.sha256(str(settings.STATIC_ROOT).encode())
    entries = []
    for finder in get_finders():
        for path, storage in finder.list([]):
            stat = os.stat(storage.path(path))
            entries.append(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    for entry in sorted(entries):
        digest.update(entry.encode() + b"\n")
    return digest.hexdigest()


class Command(BaseCommand):
    help = (
        "Bring this checkout up to date for serving: migrate if a migration is unapplied, collect static "
        "files if one changed, seed the demo tenants. Says in one line per step what it did or skipped."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        pending = unapplied_migrations()
        if pending:
            self.stdout.write(f"==> migrate: applying {pending} migration{'s' if pending != 1 else ''}")
            call_command("migrate", interactive=False, verbosity=0)
        else:
            self.stdout.write("==> migrate: skipped, the database is up to date")

        stamp = Path(settings.STATIC_ROOT) / STAMP
        fingerprint = static_fingerprint()
        if stamp.exists() and stamp.read_text() == fingerprint:
            self.stdout.write("==> collectstatic: skipped, no static file changed since the last run")
        else:
            self.stdout.write("==> collectstatic: collecting the pages' scripts and styles")
            call_command("collectstatic", interactive=False, verbosity=0)
            stamp.write_text(fingerprint)

        self.stdout.write("==> seed_demo: the demo tenants and the admin account")
        call_command("seed_demo", stdout=self.stdout, stderr=self.stderr)
