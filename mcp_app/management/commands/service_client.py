"""Make a service client of a tenant: a program's client id and secret for the client credentials grant."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from mcp_app.oauth import service_clients
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Make a service client of TENANT acting as the member USERNAME (AMB-197). Prints the client id, "
        "then the secret on the last line (shown once). A program gets tokens for the tenant's endpoint "
        "at /oauth/token with grant_type=client_credentials."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("--user", required=True, help="The member the client acts as.")
        parser.add_argument(
            "--scope", action="append", default=[], help="A scope its tokens may carry (repeat)."
        )
        parser.add_argument("--name", default="", help="Shown in the admin.")

    def handle(self, *args: Any, tenant: str, user: str, scope: list[str], name: str, **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant, is_active=True).first()
        if row is None:
            raise CommandError(f"No active tenant {tenant!r}.")
        member = get_user_model().objects.filter(username=user, is_active=True).first()
        if member is None:
            raise CommandError(f"No active user {user!r}.")
        try:
            made = service_clients.create(row, member, name, " ".join(scope))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"client_id: {made.client_id}")
        self.stdout.write(f"scope: {made.row.scope}")
        self.stdout.write(made.client_secret)
