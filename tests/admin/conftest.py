"""Fixtures for admin tests: one definition of each kind in tenant A, and event capture."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from mcp_app.models import Prompt, Resource, ResourceTemplate
from tests.admin.support import GroupListener


@pytest.fixture
def prompt_a(tenant_a) -> Prompt:
    return Prompt.objects.create(
        tenant=tenant_a,
        name="review",
        arguments=[{"name": "code", "required": True}],
        messages=[{"role": "user", "content": {"type": "text", "text": "Review {{ code }}"}}],
    )


@pytest.fixture
def resource_a(tenant_a) -> Resource:
    return Resource.objects.create(tenant=tenant_a, uri="a://readme", name="readme", text="hello")


@pytest.fixture
def template_a(tenant_a) -> ResourceTemplate:
    return ResourceTemplate.objects.create(
        tenant=tenant_a,
        uri_template="a://users/{id}",
        name="user",
        handler="template",
        handler_config={"text": "user {{ id }}"},
    )


@pytest.fixture
def listen():
    """Return a factory of GroupListener; flushes the in-memory layer afterwards."""
    yield GroupListener
    async_to_sync(get_channel_layer().flush)()
