"""Mint an API key of a tenant for a headless client (a CI job, an agent on a server): AMB-202."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from mcp_app.oauth import api_keys
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Mint an API key of TENANT acting as the member USERNAME, or with --service as the tenant itself. "
        "Prints what it is, then the key alone on the last line (shown once). Clients send it as "
        "'Authorization: Bearer <key>' to the tenant's MCP endpoint."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--user", help="The member the key acts as.")
        who.add_argument("--service", action="store_true", help="The key acts as the tenant itself.")
        parser.add_argument("--scope", action="append", default=[], help="A scope it carries (repeat).")
        parser.add_argument(
            "--days", type=int, default=api_keys.DEFAULT_DAYS, help=f"Days it lasts (1-{api_keys.MAX_DAYS})."
        )
        parser.add_argument(
            "--allow",
            action="append",
            default=[],
            help="An address or network (CIDR) it may come from (repeat).",
        )
        parser.add_argument("--name", default="", help="What uses it, shown in the admin.")

    def handle(self, *args: Any, tenant: str, user: str | None, service: bool, **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant, is_active=True).first()
        if row is None:
            raise CommandError(f"No active tenant {tenant!r}.")
        member = None
        if user is not None:
            member = get_user_model().objects.filter(username=user, is_active=True).first()
            if member is None:
                raise CommandError(f"No active user {user!r}.")
        try:
            made = api_keys.create(
                row,
                member,
                options["name"] or ("CI key" if member is None else f"Key of {user}"),
                " ".join(options["scope"]),
                options["days"],
                "\n".join(options["allow"]),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"acts as: {made.row.acts_as}")
        self.stdout.write(f"scope: {made.row.scope}")
        self.stdout.write(f"expires: {made.row.expires_at.isoformat(timespec='seconds')}")
        self.stdout.write(made.key)
