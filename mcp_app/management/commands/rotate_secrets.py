"""Re-encrypt every stored handler secret (tools' and upstream servers' secret headers, OAuth providers'
client secrets, connected accounts' tokens) with the current key (the first of MCP_SECRETS_KEY, or SECRET_KEY).

Run it after putting a new key in front of the old one; once it reports nothing unreadable, the old
key can be removed (then restart every process). Rows are rewritten with a queryset update: no
history entry, no list_changed, since nothing a client sees has changed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from mcp_app.handlers.secrets import SecretsError, rotate
from mcp_app.models import Connection, Provider, Tool, Upstream
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Re-encrypt every stored handler secret with the current key."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only report what would be re-encrypted and what cannot be read.",
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        rotated, rotated_upstreams, unreadable = 0, set(), []
        rows = Tool.objects.exclude(handler_secrets="").select_related("tenant").order_by("pk")
        with transaction.atomic():
            for tool in rows.only("pk", "name", "tenant__slug", "handler_secrets").iterator():
                try:
                    token = rotate(tool.handler_secrets)
                except SecretsError:
                    unreadable.append(f"{tool.tenant.slug}/{tool.name}")
                    continue
                if not dry_run:
                    Tool.objects.filter(pk=tool.pk, handler_secrets=tool.handler_secrets).update(
                        handler_secrets=token
                    )
                rotated += 1
            # An upstream's secret headers and its OAuth client secret (AMB-198), each its own token.
            for column in ("secret_headers", "oauth_client_secret"):
                upstreams = Upstream.objects.exclude(**{column: ""}).select_related("tenant").order_by("pk")
                for upstream in upstreams.only("pk", "name", "tenant__slug", column).iterator():
                    stored = getattr(upstream, column)
                    try:
                        token = rotate(stored)
                    except SecretsError:
                        unreadable.append(f"{upstream.tenant.slug}/upstream {upstream.name}")
                        continue
                    if not dry_run:
                        Upstream.objects.filter(pk=upstream.pk, **{column: stored}).update(**{column: token})
                    rotated_upstreams.add(upstream.pk)
            # Connected accounts (AMB-207, AMB-208): providers' client secrets and each connection's tokens.
            rotated_accounts = 0
            for model, column in ((Provider, "client_secret"), (Connection, "tokens")):
                accounts = model.objects.exclude(**{column: ""}).select_related("tenant").order_by("pk")
                for row in accounts.iterator():
                    stored = getattr(row, column)
                    try:
                        token = rotate(stored)
                    except SecretsError:
                        unreadable.append(f"{row.tenant.slug}/{model._meta.verbose_name} {row}")
                        continue
                    if not dry_run:
                        model.objects.filter(pk=row.pk, **{column: stored}).update(**{column: token})
                    rotated_accounts += 1
            # A tenant's own identity provider's introspection client secret (AMB-203).
            rotated_tenants = 0
            for tenant in Tenant.objects.exclude(identity_client_secret="").only(
                "pk", "slug", "identity_client_secret"
            ):
                stored = tenant.identity_client_secret
                try:
                    token = rotate(stored)
                except SecretsError:
                    unreadable.append(f"{tenant.slug}/identity provider")
                    continue
                if not dry_run:
                    Tenant.objects.filter(pk=tenant.pk, identity_client_secret=stored).update(
                        identity_client_secret=token
                    )
                rotated_tenants += 1
        verb = "would re-encrypt" if dry_run else "re-encrypted"
        self.stdout.write(
            f"{verb} the secrets of {rotated} tool(s) and {len(rotated_upstreams)} upstream server(s), "
            f"and {rotated_accounts} provider secret(s) and connection(s)."
        )
        if rotated_tenants:
            self.stdout.write(f"{verb} the identity provider secrets of {rotated_tenants} tenant(s).")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} tool(s) have secrets no configured key can read (enter them again, or "
                f"add the key they were written with to MCP_SECRETS_KEY): {', '.join(unreadable)}"
            )
