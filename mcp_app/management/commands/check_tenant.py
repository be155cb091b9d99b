"""Check a tenant as its clients meet it (mcp_app/selfcheck/): print the report, exit 1 on any error.

Every error names the definition a client would fail on; ``--json`` prints the API's report instead of
lines; ``--offline`` leaves out what reaches out (DNS, dry runs, upstream servers), as the admin's
check on save does.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError

from mcp_app import federation
from mcp_app.selfcheck import runner
from mcp_app.selfcheck.report import Report
from tenants.models import Tenant


async def _run(slug: str, network: bool) -> Report:
    try:
        return await runner.run(slug, network=network)
    finally:
        await federation.close_all()  # this loop ends with the command (federation/__init__.py)


class Command(BaseCommand):
    help = "Check a tenant's definitions the way its clients meet them; exit 1 when one would fail a client."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument(
            "--offline", action="store_true", help="No DNS, dry runs or upstream servers (as on save)."
        )

    def handle(self, *args: Any, tenant: str, **options: Any) -> None:
        if not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"No tenant {tenant!r}.")
        report = async_to_sync(_run)(tenant, not options["offline"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        else:
            for group in report.groups():
                self.stdout.write(f"{group.kind} {group.name}:" if group.name else f"{group.kind}:")
                for finding in group.findings:
                    self.stdout.write(f"  {finding.severity}: {finding.message}")
                if group.fix_url:
                    self.stdout.write(f"  fix: {group.fix_url}")
            self.stdout.write(report.summary())
        if not report.ok:
            named = ", ".join(sorted({f"{f.kind} {f.name}".strip() for f in report.errors}))
            raise CommandError(f"{len(report.errors)} error(s) a client would fail on: {named}.")
