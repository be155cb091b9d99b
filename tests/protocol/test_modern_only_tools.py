"""A tool only 2026-07-28 can describe (an output schema that is not an object) reaches modern clients only."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.core.context import RequestContext
from mcp_app.handlers.python import register
from mcp_app.models import Tool
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"


@register("test_primes")
async def primes(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [], "structuredContent": [2, 3, 5, 7]}


@pytest.fixture
def primes_tenant(tenant_a):
    tool = Tool(
        tenant=tenant_a,
        name="primes",
        input_schema={"type": "object"},
        output_schema={"type": "array", "items": {"type": "integer"}},
        handler="python",
        handler_config={"callable": "test_primes"},
    )
    tool.full_clean()  # the admin accepts an output schema of any JSON Schema type
    tool.save()
    Tool.objects.create(tenant=tenant_a, name="echo", handler="python", handler_config={"callable": "echo"})
    return tenant_a


async def test_a_modern_client_lists_and_calls_a_tool_returning_an_array(primes_tenant):
    ctx = make_ctx(primes_tenant, version=MODERN, session=None)
    listed = {t["name"]: t for t in (await result_of(ctx, "tools/list"))["tools"]}
    assert listed["primes"]["outputSchema"] == {"type": "array", "items": {"type": "integer"}}
    result = await result_of(ctx, "tools/call", {"name": "primes", "arguments": {}})
    assert result["structuredContent"] == [2, 3, 5, 7]
    assert result["content"] == [{"type": "text", "text": "[2, 3, 5, 7]"}]  # mirrored for text-only readers


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05"])
async def test_a_legacy_session_neither_sees_nor_calls_it(primes_tenant, version):
    ctx = make_ctx(primes_tenant, version=version)
    names = [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]]
    assert names == ["echo"]
    error = await error_of(ctx, "tools/call", {"name": "primes", "arguments": {}})
    assert error["code"] == INVALID_PARAMS and error["message"] == "Unknown tool: primes"


def test_the_admin_still_refuses_an_input_schema_that_is_not_an_object(tenant_a):
    tool = Tool(
        tenant=tenant_a,
        name="bad",
        input_schema={"type": "array"},
        handler="python",
        handler_config={"callable": "echo"},
    )
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    assert '"type": "object" at the root' in str(caught.value.message_dict["input_schema"])
