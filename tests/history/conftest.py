"""Fixtures of the history tests: a tool of tenant A edited once in the admin by alice."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.test import Client
from django.urls import reverse

from mcp_app.models import Tool
from tests.admin.support import GroupListener, tool_form_data


def edit_in_admin(client: Client, tool: Tool, **changes: object) -> None:
    """Save the tool's change form with `changes`, as a person does (the middleware records who)."""
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool.pk]), tool_form_data(tool, **changes)
    )
    assert response.status_code == 302, response.content.decode()[:3000]


@pytest.fixture
def edited_tool(client: Client, alice, tool_a: Tool) -> Tool:
    """tool_a after alice changed its greeting and description in the admin (two versions)."""
    client.force_login(alice)
    edit_in_admin(
        client,
        tool_a,
        description="Say hello loudly.",
        handler_config='{"text": "HELLO, {{ name }}!"}',
    )
    client.logout()
    tool_a.refresh_from_db()
    return tool_a


@pytest.fixture
def listen():
    """A factory of GroupListener on a tenant's group; flushes the layer afterwards."""
    yield GroupListener
    async_to_sync(get_channel_layer().flush)()
