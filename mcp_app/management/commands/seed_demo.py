"""Create or update the demo tenants from their documents (and the admin account): safe to run on every start."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from mcp_app.demo import secure
from mcp_app.demo.seed import DEMO_SLUG, SECURE_SLUG, seed_tenant

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = "Create the demo tenant and the admin account when missing (idempotent; --reset restores edits)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--tenant-only", action="store_true", help="Seed the demo tenant only, no admin account."
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Restore demo rows that were edited (default: create missing rows, keep edited ones).",
        )
        parser.add_argument(
            "--print-login",
            action="store_true",
            help="Print the admin login even when the account exists (sets a new generated password "
            "unless MCP_ADMIN_PASSWORD is set).",
        )

    def handle(
        self,
        *args: Any,
        tenant_only: bool = False,
        print_login: bool = False,
        reset: bool = False,
        **options: Any,
    ) -> None:
        with transaction.atomic():
            seeded = seed_tenant(DEMO_SLUG, reset)
            secure_seeded = seed_tenant(SECURE_SLUG, reset)
            login = None if tenant_only else self.seed_admin(print_login)
            secure_password = None if tenant_only else secure.seed_secure_user(print_login)
        self.stdout.write(f"Demo tenant '{DEMO_SLUG}': {seeded.summary()}.")
        if login:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Admin login: {login[0]} / {login[1]}  ({settings.MCP_PUBLIC_URL}/admin/)"
                )
            )
        elif not tenant_only:
            # Every start says how to sign in: the password itself is shown only when it is set (AMB-236).
            self.stdout.write(
                f"Admin login: {ADMIN_USERNAME} (password unchanged: `manage.py seed_demo --print-login` sets and "
                f"prints a new one, or set MCP_ADMIN_PASSWORD)  ({settings.MCP_PUBLIC_URL}/admin/)"
            )
        self.stdout.write(f"MCP URL: {settings.MCP_PUBLIC_URL}/t/{DEMO_SLUG}/mcp")
        self.stdout.write(f"OAuth tenant '{SECURE_SLUG}': {secure_seeded.summary()}.")
        if secure_password:
            self.stdout.write(
                self.style.SUCCESS(f"Secure tenant login: {secure.SECURE_USERNAME} / {secure_password}")
            )
        elif not tenant_only:
            self.stdout.write(
                f"Secure tenant login: {secure.SECURE_USERNAME} (password unchanged; --print-login sets "
                "and prints a new one, or set MCP_SECURE_USER_PASSWORD)"
            )
        self.stdout.write(
            f"MCP URL (OAuth, sign in as {secure.SECURE_USERNAME}): "
            f"{settings.MCP_PUBLIC_URL}/t/{SECURE_SLUG}/mcp"
        )

    def seed_admin(self, print_login: bool) -> tuple[str, str] | None:
        """Ensure the superuser exists; return (username, password) when the login should be printed."""
        user_model = get_user_model()
        env_password = os.environ.get("MCP_ADMIN_PASSWORD") or None
        user = user_model.objects.filter(username=ADMIN_USERNAME).first()
        password: str | None
        if user is None:
            password = env_password or secrets.token_urlsafe(12)
            user_model.objects.create_superuser(ADMIN_USERNAME, "admin@example.com", password)
            return ADMIN_USERNAME, password
        changed = False
        if not (user.is_superuser and user.is_staff and user.is_active):
            user.is_superuser = user.is_staff = user.is_active = True
            changed = True
        password = None
        if env_password and not user.check_password(env_password):
            password = env_password  # the environment is the source of truth for the password
        elif print_login:
            # The stored password cannot be read back: printing a login means setting a known one.
            password = env_password or secrets.token_urlsafe(12)
        if password:
            user.set_password(password)
            changed = True
        if changed:
            user.save()
        return (ADMIN_USERNAME, password or env_password or "") if print_login else None
