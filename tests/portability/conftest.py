"""A tenant rich in definitions of every kind (the seeded demo plus a few edge cases), for tenant_a."""

from __future__ import annotations

import pytest

from mcp_app.demo.seed import DEMO_SLUG, seed_tenant
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Resource, Tool
from tenants.models import Tenant


@pytest.fixture
def rich_tenant(db) -> Tenant:
    """The demo tenant (tools of every kind, prompts, text and binary resources, a template) and more."""
    seed_tenant(DEMO_SLUG, reset=False)
    tenant = Tenant.objects.get(slug="demo")
    tenant.cache_ttl_ms = 1234
    tenant.allowed_origins = "https://app.example.com\nhttps://other.example.com"
    tenant.save()
    Tool.objects.create(
        tenant=tenant,
        name="call_api",
        title="Call the API",
        description="Line one.\nLine two, with trailing spaces   \n",
        input_schema={"type": "object", "properties": {"q": {"type": "string", "default": "1"}}},
        output_schema={"type": "object", "properties": {"n": {"type": "number"}}},
        annotations={"readOnlyHint": True},
        handler="http",
        handler_config={"url": "https://api.example.com/search", "method": "GET", "timeout": 5},
        handler_secrets=encrypt_secrets({"Authorization": "Bearer s3cret", "X-Api-Key": "k"}),
        timeout_seconds=12,
        enabled=False,
        required_scope="search:read",
        approval="once",
        approval_without_elicitation="run",
        task_support="optional",
        meta={"example.com/flag": True, "example.com/count": 1},
    )
    Tool.objects.create(  # kept results travel with the tool (AMB-374)
        tenant=tenant,
        name="look_up",
        annotations={"readOnlyHint": True, "idempotentHint": True},
        handler="template",
        handler_config={"text": "Found {{ q }}."},
        result_cache_seconds=90,
        result_cache_shared=True,
    )
    Resource.objects.create(
        tenant=tenant, uri="demo://empty.bin", name="empty", mime_type="application/octet-stream", blob=b""
    )
    Resource.objects.create(tenant=tenant, uri="demo://blank", name="blank", mime_type="", text="")
    return tenant
