"""A tenant's quotas: how many calls of a tool (or of every tool) a caller, or everyone together, may
make per minute, hour or day (AMB-352). Counted by protocol/quotas.py."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core.types import QuotaDef
from mcp_app.definitions import rules
from mcp_app.models.versioned import Versioned
from tenants.models import Tenant

# More would be a tenant's way to make every call slow (each quota is a counter per call), not a quota.
MAX_QUOTAS_PER_TENANT = 100
MAX_CALLS = 10_000_000

quota_name_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,64}$", "Quota names are 1-64 characters of letters, digits, '_', '-' and '.'."
)


class Window(models.TextChoices):
    MINUTE = "minute", "a minute"
    HOUR = "hour", "an hour"
    DAY = "day", "a day (UTC)"


WINDOW_SECONDS = {Window.MINUTE: 60, Window.HOUR: 3600, Window.DAY: 86400}


class Per(models.TextChoices):
    CALLER = (
        "caller",
        "Each caller (API key, identity-provider subject, user or client; anonymous ones by address)",
    )
    TENANT = "tenant", "Every caller together"


class Quota(Versioned):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64, validators=[quota_name_validator])
    description = models.TextField(blank=True)
    tool = models.CharField(
        max_length=128, blank=True, help_text="The tool it counts; empty: every tool of the tenant."
    )
    calls = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_CALLS)], help_text="Calls allowed per window."
    )
    window = models.CharField(max_length=8, choices=Window.choices, default=Window.MINUTE)
    per = models.CharField(max_length=8, choices=Per.choices, default=Per.CALLER)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = HistoricalRecords(excluded_fields=["updated_at"])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_quota_name_per_tenant")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        rules.governance_rule(self, MAX_QUOTAS_PER_TENANT, "quotas", "the quota would never count")

    def to_def(self) -> QuotaDef:
        return QuotaDef(
            name=self.name, tool=self.tool, calls=self.calls, seconds=WINDOW_SECONDS[Window(self.window)],
            window=self.window, per=self.per,
        )  # fmt: skip
