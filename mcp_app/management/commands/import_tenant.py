"""Import a tenant document: everything checked first, one transaction, idempotent (docs/decisions/portability.md).

An `mcpServers` file as Claude Desktop or VS Code writes it is imported too, as the tenant's upstreams
(mcp_app/portability/mcp_servers.py, AMB-170).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from mcp_app.portability import mcp_servers
from mcp_app.portability.document import DocumentError, loads
from mcp_app.portability.importer import Plan, import_document
from tenants.models import Tenant

# Exit status when the document has problems (CommandError's own status, 1, means it could not run).
INVALID = 2


class Command(BaseCommand):
    help = (
        "Import FILE (YAML or JSON, '-' for standard input) into tenant --tenant (default: the tenant the "
        "document names in `tenant:`): create and change "
        "what differs, delete what the document lacks with --prune, or only show it with --dry-run. "
        "An mcpServers file (Claude Desktop, VS Code) creates the tenant's upstreams from its URL entries."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--tenant",
            help="Slug of the tenant to import into (default: the document's own `tenant:`; an mcpServers "
            "file names none, so it needs this).",
        )
        parser.add_argument("--create", action="store_true", help="Create the tenant when it does not exist.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Check and show the changes; change nothing."
        )
        parser.add_argument(
            "--prune", action="store_true", help="Delete definitions the document does not have."
        )
        parser.add_argument(
            "--draft",
            action="store_true",
            help="Stage the document's definitions as drafts: clients keep the published versions until "
            "`manage.py publish_tenant` (or Publish in the admin or the API).",
        )

    def handle(
        self,
        *args: Any,
        file: str,
        tenant: str | None,
        create: bool,
        dry_run: bool,
        prune: bool,
        draft: bool,
        **options: Any,
    ) -> None:
        try:
            raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        try:
            document = loads(raw)
            servers = mcp_servers.servers_of(document) is not None
            if servers and prune:
                raise CommandError("--prune applies to a tenant document, not to an mcpServers file.")
            if servers and draft:
                raise CommandError("--draft applies to a tenant document: an mcpServers file makes upstreams.")
            if draft and prune:
                raise CommandError("--draft cannot stage deletions: import with --prune, or without --draft.")
            tenant = tenant or self._named_tenant(document, servers)
            with transaction.atomic():
                target = self._tenant(tenant, create)
                plan: mcp_servers.ServersPlan | Plan
                if servers:
                    servers_plan = mcp_servers.plan(target, document)
                    if not dry_run:
                        mcp_servers.apply(servers_plan)
                    plan = servers_plan
                else:
                    plan = import_document(target, document, prune=prune, dry_run=dry_run, draft=draft)
                if dry_run:
                    transaction.set_rollback(True)  # a tenant made by --create is not kept either
        except DocumentError as exc:
            for path, message in exc.problems:
                self.stderr.write(f"{path}: {message}")
            self.stderr.write(f"{len(exc.problems)} problem(s); nothing was changed.")
            raise SystemExit(INVALID) from None
        for line in plan.lines():
            self.stdout.write(line)
        if dry_run:
            self.stdout.write("Dry run: nothing was changed.")
        elif not plan.has_changes:
            self.stdout.write("Already up to date: nothing was changed.")
        elif draft:
            self.stdout.write(
                f"Staged as drafts: clients see no change until `manage.py publish_tenant {tenant}`."
            )

    def _named_tenant(self, document: Any, servers: bool) -> str:
        """The slug a tenant document names (`export_tenant` writes it), when --tenant names none."""
        named = None if servers or not isinstance(document, dict) else document.get("tenant")
        if not isinstance(named, str) or not named:
            what = "an mcpServers file" if servers else "the document"
            raise CommandError(f"Name the tenant to import into with --tenant: {what} names none.")
        return named

    def _tenant(self, slug: str, create: bool) -> Tenant:
        found = Tenant.objects.filter(slug=slug).first()
        if found is not None:
            return found
        if not create:
            raise CommandError(f"No tenant {slug!r}; add --create to make it.")
        tenant = Tenant(slug=slug, name=slug, auth_mode="oauth")
        try:
            tenant.full_clean()
        except ValidationError as exc:
            raise CommandError(f"Cannot create tenant {slug!r}: {' '.join(exc.messages)}") from None
        tenant.save()
        return tenant
