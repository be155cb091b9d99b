"""The Streamable HTTP session record (the database session store)."""

from __future__ import annotations

import datetime
from typing import Self

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenants.models import Tenant, TenantQuerySet


def _session_expired(now: datetime.datetime) -> models.Q:
    """Idle past MCP_SESSION_IDLE_SECONDS, or never used since its initialize (last_seen_at still
    before created_at) and made more than MCP_SESSION_FIRST_IDLE_SECONDS ago (AMB-104)."""
    idle = settings.MCP_SESSION_IDLE_SECONDS
    first = min(settings.MCP_SESSION_FIRST_IDLE_SECONDS, idle)
    return models.Q(last_seen_at__lt=now - datetime.timedelta(seconds=idle)) | models.Q(
        last_seen_at__lt=models.F("created_at"), created_at__lt=now - datetime.timedelta(seconds=first)
    )


class McpSessionQuerySet(TenantQuerySet):
    def open(self, now: datetime.datetime | None = None) -> Self:
        return self.exclude(_session_expired(now or timezone.now()))

    def expired(self, now: datetime.datetime | None = None) -> Self:
        return self.filter(_session_expired(now or timezone.now()))


class McpSession(models.Model):
    """A Streamable HTTP session (database session store; Redis keeps them when REDIS_URL is set)."""

    id = models.CharField(primary_key=True, max_length=64)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # Who opened it, as streams/session_admission counts clients (user, OAuth client or address).
    owner = models.CharField(max_length=255, blank=True, default="")
    state = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(db_index=True)

    objects = McpSessionQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "owner"], name="mcp_session_owner")]

    def __str__(self) -> str:
        return self.id
