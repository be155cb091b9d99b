"""Approval decisions (Tool.approval): record each one, and find an "ask once" approval given before."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from mcp_app.models import ApprovalDecision


@database_sync_to_async
def approved_before(tenant_id: int, tool_id: int, remembered_for: str) -> bool:
    return (
        ApprovalDecision.objects.for_tenant(tenant_id)
        .filter(tool_id=tool_id, remembered_for=remembered_for, outcome=ApprovalDecision.Outcome.APPROVED)
        .exists()
    )


@database_sync_to_async
def record(
    *,
    tenant_id: int,
    tool_id: int,
    tool_name: str,
    arguments: dict[str, Any],
    outcome: str,
    user_id: int | None,
    client_id: str | None,
    session_id: str | None,
    client_address: str | None,
    remembered_for: str = "",
) -> None:
    ApprovalDecision.objects.create(
        tenant_id=tenant_id,
        tool_id=tool_id,
        tool_name=tool_name,
        arguments=arguments,
        outcome=outcome,
        user_id=user_id,
        client_id=client_id or "",
        session_id=session_id or "",
        client_address=(client_address or "")[:100],
        remembered_for=remembered_for,
    )
