"""A tenant's governance events (AMB-355): each use a policy denied, a guardrail blocked, redacted or
audited, or a quota throttled. Gathered in memory by governance/audit.py, written in batches by the
usage flush, deleted after MCP_GOVERNANCE_EVENT_DAYS; read-only in the admin, for the tenant's owners."""

from __future__ import annotations

from django.db import models

from tenants.models import Tenant, TenantQuerySet


class EventKind(models.TextChoices):
    DENIED = "denied", "Denied by a policy"
    BLOCKED = "blocked", "Blocked by a guardrail"
    REDACTED = "redacted", "Redacted by a guardrail"
    AUDITED = "audited", "Seen by an auditing guardrail"
    THROTTLED = "throttled", "Throttled by a quota"


class GovernanceEvent(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    rule = models.CharField(max_length=64, blank=True, help_text="The policy, guardrail or quota.")
    target = models.CharField(max_length=300, blank=True)
    method = models.CharField(max_length=40, blank=True)
    caller = models.CharField(max_length=120, blank=True)
    # What a guardrail found (its kind and count, where), never the text; a policy's denial: nothing.
    detail = models.JSONField(default=dict, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "created_at"], name="governance_tenant_time")]
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind} {self.rule or '-'} {self.target}"
