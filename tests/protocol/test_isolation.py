"""Charlie's tenant B never sees anything of tenant A (AMB: another tenant's object = a missing one)."""

from __future__ import annotations

from mcp_app.protocol.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx


async def test_tenant_b_lists_only_its_own_tools_prompts_resources_and_templates(demo_a, demo_b, charlie):
    ctx = make_ctx(demo_b)
    assert [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]] == ["b_tool"]
    assert [p["name"] for p in (await result_of(ctx, "prompts/list"))["prompts"]] == ["b_prompt"]
    assert [r["uri"] for r in (await result_of(ctx, "resources/list"))["resources"]] == ["b://doc"]
    templates = (await result_of(ctx, "resources/templates/list"))["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["b://items/{id}"]


async def test_tenant_b_cannot_call_get_read_subscribe_or_complete_tenant_a_definitions(
    demo_a, demo_b, charlie
):
    ctx = make_ctx(demo_b)
    missing_tool = await error_of(ctx, "tools/call", {"name": "nonexistent", "arguments": {}})
    a_tool = await error_of(ctx, "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    assert a_tool == {**missing_tool, "message": "Unknown tool: echo"}
    assert a_tool["code"] == INVALID_PARAMS
    assert (await error_of(ctx, "prompts/get", {"name": "code_review", "arguments": {"code": "x"}}))[
        "code"
    ] == (INVALID_PARAMS)
    for uri in ("demo://readme", "demo://users/1/profile"):
        assert (await error_of(ctx, "resources/read", {"uri": uri}))["code"] == RESOURCE_NOT_FOUND
        assert (await error_of(ctx, "resources/subscribe", {"uri": uri}))["code"] == RESOURCE_NOT_FOUND
    completion = {
        "ref": {"type": "ref/prompt", "name": "code_review"},
        "argument": {"name": "language", "value": ""},
    }
    assert (await error_of(ctx, "completion/complete", completion))["code"] == INVALID_PARAMS


async def test_a_cursor_issued_to_tenant_a_is_invalid_for_tenant_b(demo_a, demo_b, charlie, settings):
    settings.MCP_PAGE_SIZE = 1
    cursor = (await result_of(make_ctx(demo_a), "tools/list"))["nextCursor"]
    error = await error_of(make_ctx(demo_b), "tools/list", {"cursor": cursor})
    assert error["code"] == INVALID_PARAMS


async def test_tenant_a_lists_none_of_tenant_b_definitions(demo_a, demo_b, alice):
    ctx = make_ctx(demo_a)
    assert "b_tool" not in [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]]
    assert "b://doc" not in [r["uri"] for r in (await result_of(ctx, "resources/list"))["resources"]]
