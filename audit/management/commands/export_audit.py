"""manage.py export_audit [--tenant SLUG] [--since ISO] [-o FILE]: the audit trail as JSON lines."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from audit.export import json_lines
from audit.models import AuditEvent


def _since(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--since must be an ISO 8601 date or time (2026-05-01, 2026-05-01T12:00Z), got {value!r}") from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = "Write audit events as JSON lines, oldest first (to standard output, or to a file with -o)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", metavar="SLUG", help="Only this tenant's events (also after it was deleted).")
        parser.add_argument("--since", metavar="ISO", help="Only events at or after this time (naive: server time zone).")
        parser.add_argument("-o", "--output", metavar="FILE", help="Write here instead of standard output.")

    def handle(self, *args: Any, tenant: str | None, since: str | None, output: str | None, **options: Any) -> None:
        events = AuditEvent.objects.order_by("created_at", "id")
        if tenant:
            events = events.filter(tenant_slug=tenant)
        if since:
            events = events.filter(created_at__gte=_since(since))
        count = 0
        try:
            stream = open(output, "w", encoding="utf-8") if output else None  # noqa: SIM115 - closed below
        except OSError as error:
            raise CommandError(f"Cannot write {output}: {error.strerror}") from None
        try:
            for line in json_lines(events.iterator()):
                if stream is None:
                    self.stdout.write(line, ending="")
                else:
                    stream.write(line)
                count += 1
        finally:
            if stream is not None:
                stream.close()
        if output:
            self.stderr.write(f"{count} event(s) written to {output}")
