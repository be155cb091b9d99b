"""A tenant's sampling of its governance events (AMB-360): the percent of each kind it keeps."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

# What a governance event says happened (mcp_app/governance/audit.py).
EVENT_KINDS = ("denied", "blocked", "redacted", "audited", "throttled")


def validate_sampling(value: Any) -> None:
    """`{"audited": 10}`: a kind of governance event -> the whole percent of such events kept (1-100)."""
    if not isinstance(value, dict):
        raise ValidationError(
            'A JSON object: a kind of governance event -> the percent of such events kept, e.g. {"audited": 10}.'
        )
    for kind, percent in value.items():
        if kind not in EVENT_KINDS:
            raise ValidationError(f"{str(kind)[:40]!r} is not a kind of governance event: one of {', '.join(EVENT_KINDS)}.")
        if not isinstance(percent, int) or isinstance(percent, bool) or not 1 <= percent <= 100:
            raise ValidationError(f"{kind}: a whole percent from 1 to 100, not {str(percent)[:40]}.")
