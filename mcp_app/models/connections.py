"""A tenant's OAuth providers and the people's connections to them (a module of mcp_app/models/).

Both tables sit behind the tenant wall (AMB-96). Secrets (a provider's client secret, a connection's
tokens) are stored encrypted with the platform's rotatable keys (handlers/secrets.py) and never shown.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

from mcp_app.handlers.secrets import decrypt_secrets
from tenants.models import Tenant, TenantQuerySet

provider_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,62}$",
    "Names are 1-63 lowercase letters, digits, '_' and '-', starting with a letter or digit.",
)


class Provider(models.Model):
    """An OAuth 2.0 / OpenID Connect provider whose accounts the tenant's users connect (AMB-207)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(
        max_length=63,
        validators=[provider_name_validator],
        help_text="How tools name this provider, e.g. 'github'.",
    )
    display_name = models.CharField(max_length=200, help_text="What people see, e.g. 'GitHub'.")
    discovery_url = models.URLField(
        max_length=2000,
        blank=True,
        help_text="Its issuer or metadata URL (RFC 8414 or OpenID discovery); or set the endpoints below.",
    )
    authorize_url = models.URLField(max_length=2000, blank=True, help_text="Its authorization endpoint.")
    token_url = models.URLField(max_length=2000, blank=True, help_text="Its token endpoint.")
    revocation_url = models.URLField(
        max_length=2000, blank=True, help_text="Its RFC 7009 revocation endpoint, if it has one."
    )
    client_id = models.CharField(
        max_length=2000, help_text="The client id the provider issued to this tenant."
    )
    # {"client_secret": ...} encrypted (handlers/secrets.py); "" for a public client.
    client_secret = models.TextField(blank=True, default="", editable=False)
    scopes = models.CharField(max_length=2000, blank=True, help_text="Scopes to ask for, space-separated.")
    resource = models.URLField(
        max_length=2000,
        blank=True,
        help_text="The RFC 8707 resource the tokens are for, if the provider wants one.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_provider_name_per_tenant")
        ]

    def __str__(self) -> str:
        return self.display_name or self.name

    def clean(self) -> None:
        super().clean()
        if not self.discovery_url and not (self.authorize_url and self.token_url):
            raise ValidationError(
                "Give the provider's discovery URL, or both its authorization and token endpoints."
            )

    def callback_url(self) -> str:
        """The redirect URI to register at the provider: the public URL, not a request's Host, which
        the provider compares with the registered one."""
        return settings.MCP_PUBLIC_URL + reverse("connection-callback", args=[self.tenant.slug, self.name])

    @property
    def client_secret_set(self) -> bool:
        return bool(self.client_secret)

    def secret(self) -> str:
        """The client secret in clear, for one request (SecretsError when no key reads it)."""
        return decrypt_secrets(self.client_secret).get("client_secret", "")


class Connection(models.Model):
    """One person's connection to one provider: their tokens there, encrypted (AMB-208)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="connections")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # {"access_token", "refresh_token", "scope", "expires_at"} encrypted (handlers/secrets.py).
    tokens = models.TextField(editable=False)
    # When the access token expires (None: the provider did not say); a copy outside the sealed tokens
    # so the owner's view can show it without decrypting anything.
    expires_at = models.DateTimeField(null=True, blank=True)
    connected_at = models.DateTimeField(auto_now_add=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["provider", "user"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "user"], name="one_connection_per_provider_and_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.provider}"

    def token_set(self) -> dict[str, Any]:
        return dict(decrypt_secrets(self.tokens))
