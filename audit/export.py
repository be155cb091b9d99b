"""Audit events as JSON lines: one object per event, oldest first (the admin's export and `export_audit`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from audit.models import AuditEvent


def as_dict(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.pk,
        "time": event.created_at.isoformat(),
        "action": event.action,
        "actor": event.actor_username,
        "actor_id": event.actor_id,
        "tenant": event.tenant_slug,
        "tenant_id": event.tenant_id,
        "client_id": event.client_id,
        "address": event.source_address,
        "detail": event.detail,
    }


def json_lines(events: Iterable[AuditEvent]) -> Iterator[str]:
    for event in events:
        yield json.dumps(as_dict(event), ensure_ascii=False, sort_keys=True) + "\n"
