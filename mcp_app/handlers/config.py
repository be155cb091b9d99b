"""Checks a kind's `validate_config` shares: known keys, and templates that compile."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError

from mcp_app.content import rendering
from mcp_app.core.errors import ContentError


def check_keys(config: dict[str, Any], allowed: Iterable[str], kind: str) -> None:
    unknown = set(config) - set(allowed)
    if unknown:
        raise ValidationError(f"Unknown {kind} handler keys: {', '.join(sorted(unknown))}.")


def check_templates(config: dict[str, Any], keys: Iterable[str]) -> None:
    """Each of `keys` present in `config` is a non-empty template the sandbox compiles."""
    for key in keys:
        if key not in config:
            continue
        if not isinstance(config[key], str) or not config[key].strip():
            raise ValidationError(f"'{key}' must be a non-empty template.")
        try:
            rendering.validate(config[key], f"'{key}'")
        except ContentError as exc:
            raise ValidationError(exc.message) from None
