"""Audit tests: events are written after commit, so each action runs inside `committed()`."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.core.cache import cache

from audit.export import as_dict
from audit.models import AuditEvent

ADDRESS = "203.0.113.7"


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Rate-limit counters and django-axes' failure counts live in the cache.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def committed(django_capture_on_commit_callbacks) -> Callable[[], AbstractContextManager]:
    """Runs what the block left for after commit (the tests themselves run in a rolled-back transaction)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def only_event(action: str) -> AuditEvent:
    """The one event of this action (fails on none or several)."""
    found = list(AuditEvent.objects.filter(action=action))
    assert len(found) == 1, [as_dict(e) for e in AuditEvent.objects.all()]
    return found[0]


def assert_no_secret(event: AuditEvent, *secrets: str) -> None:
    text = json.dumps(as_dict(event))
    for secret in secrets:
        assert secret not in text, (secret, text)


def row(event: AuditEvent) -> dict[str, Any]:
    return as_dict(event)
