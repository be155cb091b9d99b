"""Write a tenant's whole definition set as one YAML or JSON document (secrets by name only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_app.portability.document import dumps, export_tenant
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Export tenant SLUG's settings, tools, prompts, resources and resource templates as one "
        "document (YAML by default; JSON with --format json or an -o file ending in .json)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("-o", "--output", help="File to write (default: standard output).")
        parser.add_argument(
            "--format", choices=("yaml", "json"), help="Default: from -o's extension, else yaml."
        )

    def handle(self, *args: Any, slug: str, output: str | None, format: str | None, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant {slug!r}.")
        fmt = format or ("json" if output and output.lower().endswith(".json") else "yaml")
        text = dumps(export_tenant(tenant), fmt)
        if not output:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        self.stderr.write(f"Wrote tenant {slug} to {output}.")
