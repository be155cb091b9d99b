"""`manage.py publish_tenant <slug>`: publish every draft of a tenant as one change (AMB-220).

The step after `import_tenant --draft` in a pipeline: all drafts become the tenant's published
versions in one transaction (all or none), and connected clients hear one list_changed per list.
Exits 1 naming the definition when one cannot be published (nothing is then published).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_app.drafts import service as drafts
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Publish every draft of a tenant (tools, prompts, resources, templates) as one change."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="Slug of the tenant.")
        parser.add_argument(
            "--dry-run", action="store_true", help="List the drafts that would be published; change nothing."
        )

    def handle(self, *args: Any, tenant: str, dry_run: bool, **options: Any) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}.")
        if dry_run:
            waiting = drafts.pending(found)
            for row in waiting:
                self.stdout.write(f"{row._meta.verbose_name} {row}: {drafts.status(row)}")
            self.stdout.write(f"{len(waiting)} draft(s) would be published. Dry run: nothing was changed.")
            return
        try:
            # An operator's command, as an import: not asked whether no member keeps a tool (AMB-356).
            done = drafts.publish_all(found, confirm_no_tools=True)
        except drafts.PublishError as exc:
            raise CommandError(f"{exc} Nothing was published.") from None
        for item in done:
            self.stdout.write(f"{item.kind} {item.label}: published as version {item.version}")
        self.stdout.write(f"{len(done)} draft(s) published." if done else "No drafts: nothing to publish.")
