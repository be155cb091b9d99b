"""Personas shared by every test: alice owns tenant_a, bob views tenant_a, charlie owns tenant_b."""

from __future__ import annotations

import pytest

from tenants.models import Membership, Role, Tenant


@pytest.fixture
def tenant_a(db) -> Tenant:
    return Tenant.objects.create(slug="tenant-a", name="Tenant A", instructions="Use tenant A's tools.")


@pytest.fixture
def tenant_b(db) -> Tenant:
    return Tenant.objects.create(slug="tenant-b", name="Tenant B")


@pytest.fixture
def alice(django_user_model, tenant_a):
    user = django_user_model.objects.create_user("alice", "alice@example.com", "alice-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_a, role=Role.OWNER)
    return user


@pytest.fixture
def bob(django_user_model, tenant_a):
    user = django_user_model.objects.create_user("bob", "bob@example.com", "bob-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_a, role=Role.VIEWER)
    return user


@pytest.fixture
def charlie(django_user_model, tenant_b):
    user = django_user_model.objects.create_user("charlie", "charlie@example.com", "charlie-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_b, role=Role.OWNER)
    return user
