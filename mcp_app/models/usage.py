"""Usage: per-minute request buckets and the recent errors of each tenant."""

from __future__ import annotations

from django.db import models

from tenants.models import Tenant

# Upper bounds (milliseconds) of the request latency histogram; one more bucket holds the rest.
# Fixed, so buckets of every process and minute add up, and Prometheus-style `le` labels follow.
LATENCY_BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
LATENCY_FIELDS = tuple(f"lat_{i:02d}" for i in range(len(LATENCY_BOUNDS_MS) + 1))


class UsageBucket(models.Model):
    """One tenant's requests of one method (and tool, for tools/call) in one UTC minute.

    Written by mcp_app.usage.flush as increments (INSERT .. ON CONFLICT DO UPDATE SET x = x + new),
    so every process's flush adds to the same row; never one write per request.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    minute = models.BigIntegerField(help_text="Start of the minute, in minutes since the Unix epoch (UTC).")
    method = models.CharField(max_length=64)
    tool = models.CharField(max_length=64, blank=True, help_text="The tool of a tools/call, else empty.")
    calls = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0, help_text="Answered with a JSON-RPC error.")
    tool_errors = models.BigIntegerField(default=0, help_text="Answered with a result marked isError.")
    duration_ms = models.FloatField(default=0, help_text="Sum of the latencies (a mean, a histogram's sum).")
    lat_00 = models.BigIntegerField(default=0)
    lat_01 = models.BigIntegerField(default=0)
    lat_02 = models.BigIntegerField(default=0)
    lat_03 = models.BigIntegerField(default=0)
    lat_04 = models.BigIntegerField(default=0)
    lat_05 = models.BigIntegerField(default=0)
    lat_06 = models.BigIntegerField(default=0)
    lat_07 = models.BigIntegerField(default=0)
    lat_08 = models.BigIntegerField(default=0)
    lat_09 = models.BigIntegerField(default=0)
    lat_10 = models.BigIntegerField(default=0)
    lat_11 = models.BigIntegerField(default=0)
    lat_12 = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "minute", "method", "tool"], name="usage_bucket_key")
        ]
        indexes = [models.Index(fields=["minute"], name="usage_bucket_minute")]

    def __str__(self) -> str:
        return f"{self.method} {self.tool} @{self.minute}".replace("  ", " ")


class UsageError(models.Model):
    """A request answered with an error, for the dashboard's recent errors (the newest few per tenant)."""

    class Kind(models.TextChoices):
        ERROR = "error", "JSON-RPC error"
        TOOL_ERROR = "tool_error", "isError result"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    method = models.CharField(max_length=64)
    tool = models.CharField(max_length=64, blank=True)
    code = models.IntegerField(null=True, blank=True, help_text="The JSON-RPC error code.")
    message = models.TextField(blank=True)
    arguments = models.TextField(blank=True, help_text="The request's params, truncated, secrets redacted.")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["tenant", "-id"], name="usage_error_recent")]

    def __str__(self) -> str:
        return f"{self.method} {self.tool}: {self.message[:60]}"
