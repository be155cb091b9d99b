"""Fixtures of the security tests: the transport's clean state, the seeded demo tenant, a foreign tenant."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from mcp_app.models import Tool
from tenants.models import Tenant
from tests.transport.conftest import clean_transport_state  # noqa: F401  (autouse: fresh caches per test)


def seed_demo() -> Tenant:
    """The demo tenant exactly as `seed_demo` creates it (echo, greet, code_review, demo:// resources)."""
    call_command("seed_demo", "--tenant-only", stdout=io.StringIO())
    return Tenant.objects.get(slug="demo")


@pytest.fixture
def demo(transactional_db) -> Tenant:
    return seed_demo()


@pytest.fixture
def foreign(transactional_db) -> Tenant:
    return make_foreign()


def make_foreign() -> Tenant:
    """Another tenant with two template tools, so its tools/list pages and issues cursors."""
    tenant = Tenant.objects.create(slug="foreign", name="Foreign", auth_mode="public")
    for name in ("alpha", "beta"):
        Tool.objects.create(
            tenant=tenant,
            name=name,
            input_schema={"type": "object", "properties": {}},
            handler="template",
            handler_config={"text": f"{name} of the foreign tenant"},
        )
    return tenant


@pytest.fixture
def sleeping(transactional_db) -> Tenant:
    return make_sleeping()


def make_sleeping() -> Tenant:
    """An inactive tenant with a tool: its endpoint must look exactly like a missing one."""
    tenant = Tenant.objects.create(slug="sleeping", name="Sleeping", is_active=False, auth_mode="public")
    Tool.objects.create(
        tenant=tenant,
        name="echo",
        input_schema={"type": "object", "properties": {}},
        handler="template",
        handler_config={"text": "asleep"},
    )
    return tenant
