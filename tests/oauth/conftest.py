"""Fixtures of the authorization-server tests."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tenants.models import Membership, Role, Tenant


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Registration rate-limit counters, client display metadata and DOT's fetch backoff live in the cache.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def member(django_user_model, db):
    """dave, a viewer of the OAuth tenant `vault`: may sign in and grant."""
    tenant = Tenant.objects.create(slug="vault", name="vault", title="The Vault", auth_mode="oauth")
    user = django_user_model.objects.create_user("dave", "dave@example.com", "dave-pw-123")
    Membership.objects.create(user=user, tenant=tenant, role=Role.VIEWER)
    return user
