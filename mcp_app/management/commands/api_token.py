"""Issue a `manage` bearer token of the management API for a user (scripts, CI)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from mcp_app.api.tokens import issue_manage_token


class Command(BaseCommand):
    help = "Print a new bearer token for /api/v1/ acting as USERNAME with their roles (scope 'manage')."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--days", type=int, default=30, help="How long the token is valid (default 30).")
        parser.add_argument("--name", default="", help="What the token is for, shown in its owner's list.")

    def handle(self, *args: Any, username: str, days: int, name: str, **options: Any) -> None:
        if not 1 <= days <= 366:
            raise CommandError("--days must be between 1 and 366.")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        self.stdout.write(issue_manage_token(user, days, name))
