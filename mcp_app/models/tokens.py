"""What a person sees of their `manage` API tokens."""

from __future__ import annotations

from django.db import models


class ApiToken(models.Model):
    """What a person sees of one of their `manage` tokens (mcp_app/api/tokens.py): its name and last use.

    The token itself is django-oauth-toolkit's AccessToken (its hash, expiry, owner); this row goes with it.
    """

    token = models.OneToOneField(
        "oauth2_provider.AccessToken", on_delete=models.CASCADE, related_name="api_token"
    )
    name = models.CharField(max_length=100, help_text="What the token is for (a script, a CI pipeline).")
    last_used = models.DateTimeField(null=True, blank=True, help_text="Its last request (to the minute).")

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return self.name
