"""One way to seed rows: create what is missing, keep what a person edited (unless told to reset)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import models


def _same(current: Any, wanted: Any) -> bool:
    if isinstance(current, memoryview):  # BinaryField on PostgreSQL
        current = bytes(current)
    return current == wanted


def upsert(
    model: type[models.Model], lookup: dict[str, Any], values: dict[str, Any], reset: bool
) -> tuple[Any, str]:
    """Create a missing row, or (reset) restore a differing one; validated with full_clean."""
    obj = model.objects.filter(**lookup).first()
    if obj is None:
        obj = model(**lookup, **values)
        state = "created"
    elif not reset:
        return obj, "kept"  # the user's edits to the demo survive every restart
    elif all(_same(getattr(obj, field), value) for field, value in values.items()):
        return obj, "unchanged"
    else:
        for field, value in values.items():
            setattr(obj, field, value)
        state = "updated"
    obj.full_clean()
    obj.save()
    return obj, state


@dataclass
class Counts:
    """How many rows a seeding created, kept, updated or left unchanged."""

    by_state: dict[str, int] = field(default_factory=dict)

    def add(self, state: str) -> None:
        self.by_state[state] = self.by_state.get(state, 0) + 1
