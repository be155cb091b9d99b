"""The checks a policy, quota or guardrail shares when saved (AMB-347, AMB-352, AMB-354)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from mcp_app.definitions.checks import tool_exists


def governance_rule(row: Any, limit: int, plural: str, useless: str = "") -> None:
    """The checks a policy, quota or guardrail shares when saved: at most `limit` of them a tenant, and
    the tool it names (if any; its `tool` field) one the tenant has, or it would `useless`."""
    if row.tenant_id is None:
        return
    if useless and row.tool and not tool_exists(row.tenant_id, row.tool):
        raise ValidationError({"tool": f"This tenant has no tool named {row.tool!r}: {useless}."})
    if row._state.adding and type(row).objects.filter(tenant_id=row.tenant_id).count() >= limit:
        raise ValidationError(f"A tenant has at most {limit} {plural}.")
