"""Sync a tenant's upstream MCP servers: record what each offers now (mcp_app/upstreams/service.py).

New remote tools wait unpublished (or are published when the upstream says so: publish_new); a changed
definition waits for review; nothing a client sees changes on its own. Exits non-zero when an upstream
could not be reached, after trying every one.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_app import federation
from mcp_app.models import Upstream
from mcp_app.upstreams import service
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Sync a tenant's upstream MCP servers (all of them, or those named)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("names", nargs="*", help="Upstream names (default: every enabled one).")

    def handle(self, *args: Any, tenant: str, names: list[str], **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant).first()
        if row is None:
            raise CommandError(f"No tenant {tenant!r}.")
        upstreams = Upstream.objects.for_tenant(row).order_by("name")
        upstreams = upstreams.filter(name__in=names) if names else upstreams.filter(enabled=True)
        missing = set(names) - {u.name for u in upstreams}
        if missing:
            raise CommandError(f"Tenant {tenant!r} has no upstream {', '.join(sorted(missing))}.")
        failed = []
        for upstream in upstreams:
            try:
                report = service.sync(upstream)
            except federation.UpstreamError as exc:
                failed.append(upstream.name)
                self.stderr.write(f"{upstream.name}: {exc.message}")
                continue
            counts = ", ".join(
                f"{len(getattr(report, k))} {k}" for k in ("new", "published", "changed", "gone", "back")
            )
            self.stdout.write(f"{upstream.name}: {counts}")
            for name, why in report.not_published.items():
                self.stdout.write(f"{upstream.name}: {name} not published: {why}")
        if failed:
            raise CommandError(f"Could not reach: {', '.join(failed)}.")
