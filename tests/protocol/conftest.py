"""Fixtures for protocol tests: demo-like definitions for tenant_a, a few for tenant_b, and contexts."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.handlers.python import register
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tests.protocol.support import ICON, PNG

ECHO_OUTPUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]}


# --- python callables only these tests use ----------------------------------------------------------


@register("proto_wrong_output")
async def _wrong_output(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "sum"}], "structuredContent": {"sum": "not a number"}}


@register("proto_structured_only")
async def _structured_only(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [], "structuredContent": {"sum": 3}}


@register("proto_boom")
async def _boom(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("database password is hunter2")


@register("proto_refuse")
async def _refuse(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    raise ToolError("The order 42 does not exist.")


@register("proto_media")
async def _media(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [
            {
                "type": "text",
                "text": "see",
                "annotations": {"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"},
            },
            {"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"},
            {
                "type": "resource_link",
                "uri": "demo://readme",
                "name": "readme",
                "title": "Read me",
                "icons": [ICON],
            },
        ],
        "structuredContent": {"ok": True},
    }


# --- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
async def _close_worker_connections() -> AsyncIterator[None]:
    # The catalog reads through database_sync_to_async, whose worker thread keeps its own
    # connection; left open it blocks dropping the PostgreSQL test database.
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def demo_a(transactional_db, tenant_a) -> Any:
    """Tenant A with some of the demo tenant's definitions (mcp_app/demo/tenants/demo.yaml) and test-only tools."""
    tenant_a.title = "Demo MCP server"
    tenant_a.description = "A demo server."
    tenant_a.website_url = "https://example.com"
    tenant_a.icons = [ICON]
    tenant_a.save()
    Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        title="Echo",
        description="Echo a message.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
        output_schema=ECHO_OUTPUT,
        handler="python",
        handler_config={"callable": "echo"},
        meta={"example.com/tier": "free"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        handler="python",
        handler_config={"callable": "add"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="greet",
        title="Greeter",
        description="Greet someone.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        annotations={"readOnlyHint": True},
        icons=[ICON],
        handler="template",
        handler_config={"text": "Hello, {{ name }}!"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="wrong_output",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
        handler="python",
        handler_config={"callable": "proto_wrong_output"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="structured_only",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}},
        handler="python",
        handler_config={"callable": "proto_structured_only"},
    )
    Tool.objects.create(
        tenant=tenant_a, name="boom", handler="python", handler_config={"callable": "proto_boom"}
    )
    Tool.objects.create(
        tenant=tenant_a, name="refuse", handler="python", handler_config={"callable": "proto_refuse"}
    )
    Tool.objects.create(
        tenant=tenant_a, name="media", handler="python", handler_config={"callable": "proto_media"}
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="count_slowly",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}, "delay": {"type": "number"}},
        },
        handler="python",
        handler_config={"callable": "count_slowly"},
        timeout_seconds=1,
    )
    Tool.objects.create(
        tenant=tenant_a, name="disabled_tool", handler="template", handler_config={"text": "x"}, enabled=False
    )
    Prompt.objects.create(
        tenant=tenant_a,
        name="code_review",
        title="Code review",
        description="Review some code.",
        arguments=[
            {"name": "code", "title": "Code", "description": "The code", "required": True},
            {
                "name": "language",
                "required": False,
                "completions": ["python", "javascript", "typescript", "go", "rust"],
            },
            {
                "name": "style",
                "completions": {
                    "argument": "language",
                    "values": {"python": ["black", "ruff"], "go": ["gofmt"]},
                    "default": ["prettier"],
                },
            },
        ],
        messages=[
            {
                "role": "user",
                "content": {
                    "type": "text",
                    "text": "Please review this {{ language|default:'code' }}:\n{{ code }}",
                },
            }
        ],
        icons=[ICON],
    )
    Prompt.objects.create(
        tenant=tenant_a,
        name="describe_logo",
        messages=[
            {"role": "user", "content": {"type": "image", "resource": "demo://logo.png"}},
            {"role": "assistant", "content": {"type": "resource", "uri": "demo://readme"}},
            {"role": "user", "content": {"type": "resource_link", "uri": "demo://readme"}},
        ],
    )
    Resource.objects.create(
        tenant=tenant_a,
        uri="demo://readme",
        name="readme",
        title="Read me",
        description="How to use the demo",
        mime_type="text/markdown",
        text="# Demo\nHello.",
        annotations={"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"},
        icons=[ICON],
    )
    Resource.objects.create(
        tenant=tenant_a, uri="demo://logo.png", name="logo", mime_type="image/png", blob=PNG
    )
    Resource.objects.create(
        tenant=tenant_a,
        uri="demo://config.json",
        name="config",
        mime_type="application/json",
        text='{"a": 1}',
    )
    ResourceTemplate.objects.create(
        tenant=tenant_a,
        uri_template="demo://users/{user_id}/profile",
        name="user-profile",
        title="User profile",
        mime_type="application/json",
        handler="template",
        handler_config={"text": '{"user_id": "{{ user_id }}", "name": "User {{ user_id }}"}'},
        completions={"user_id": ["1", "2", "3", "42", "100"]},
        icons=[ICON],
    )
    ResourceTemplate.objects.create(
        tenant=tenant_a,
        uri_template="file:///{+path}",
        name="files",
        handler="template",
        handler_config={"text": "file {{ path }}"},
    )
    tenant_a.refresh_from_db()
    return tenant_a


@pytest.fixture
def demo_b(transactional_db, tenant_b) -> Any:
    """Tenant B with one definition of each kind, none shared with tenant A."""
    Tool.objects.create(tenant=tenant_b, name="b_tool", handler="template", handler_config={"text": "B"})
    Prompt.objects.create(
        tenant=tenant_b,
        name="b_prompt",
        messages=[{"role": "user", "content": {"type": "text", "text": "B"}}],
    )
    Resource.objects.create(tenant=tenant_b, uri="b://doc", name="doc", text="B doc")
    ResourceTemplate.objects.create(
        tenant=tenant_b,
        uri_template="b://items/{id}",
        name="items",
        handler="template",
        handler_config={"text": "B"},
    )
    tenant_b.refresh_from_db()
    return tenant_b
