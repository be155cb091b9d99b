"""Lifecycle: initialize, version negotiation, ping, initialized (checklist §2, §6.1)."""

from __future__ import annotations

import pytest

from mcp_app.core.versions import SUPPORTED_VERSIONS
from mcp_app.protocol.dispatch import dispatch
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from tests.protocol.support import ICON, error_of, result_of
from tests.support import make_ctx


def init_params(version: str = "2025-06-18", **overrides) -> dict:
    params = {
        "protocolVersion": version,
        "capabilities": {"sampling": {}},
        "clientInfo": {"name": "test-client", "version": "1.0"},
    }
    params.update(overrides)
    return params


async def test_lc03_initialize_result_has_version_capabilities_server_info_and_instructions(demo_a):
    result = await result_of(make_ctx(demo_a, session=None), "initialize", init_params("2025-06-18"))
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {
        "logging": {},
        "completions": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
    }
    assert result["serverInfo"] == {"name": "Tenant A", "version": "1.0.0", "title": "Demo MCP server"}
    assert result["instructions"] == "Use tenant A's tools."


async def test_lc03_instructions_are_left_out_when_the_tenant_has_none(tenant_b):
    result = await result_of(make_ctx(tenant_b, session=None), "initialize", init_params())
    assert "instructions" not in result


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
async def test_lc04_a_supported_version_is_answered_with_itself(tenant_a, version):
    result = await result_of(make_ctx(tenant_a, session=None), "initialize", init_params(version))
    assert result["protocolVersion"] == version


@pytest.mark.parametrize("version", ["2099-01-01", "2024-10-07", "1.0", ""])
async def test_lc04_an_unknown_version_gets_a_counter_offer_of_the_latest(tenant_a, version):
    result = await result_of(make_ctx(tenant_a, session=None), "initialize", init_params(version))
    assert result["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        init_params(protocolVersion=20250618),
        init_params(capabilities=None),
        init_params(capabilities=[]),
        init_params(clientInfo="c"),
        init_params(clientInfo={"name": "c"}),
        init_params(clientInfo={"version": "1"}),
    ],
)
async def test_lc02_initialize_with_missing_or_mistyped_params_is_invalid_params(tenant_a, params):
    error = await error_of(make_ctx(tenant_a, session=None), "initialize", params)
    assert error["code"] == INVALID_PARAMS


async def test_amb6_initialize_on_a_live_session_is_an_invalid_request(tenant_a):
    error = await error_of(make_ctx(tenant_a), "initialize", init_params())
    assert error["code"] == INVALID_REQUEST
    assert "already initialized" in error["message"]


async def test_sf05_the_completions_capability_is_declared_from_2025_03_26_only(tenant_a):
    old = await result_of(make_ctx(tenant_a, session=None), "initialize", init_params("2024-11-05"))
    new = await result_of(make_ctx(tenant_a, session=None), "initialize", init_params("2025-03-26"))
    assert "completions" not in old["capabilities"]
    assert new["capabilities"]["completions"] == {}


@pytest.mark.parametrize(
    ("version", "expected_keys"),
    [
        ("2024-11-05", {"name", "version"}),
        ("2025-03-26", {"name", "version"}),
        ("2025-06-18", {"name", "version", "title"}),
        ("2025-11-25", {"name", "version", "title", "description", "icons", "websiteUrl"}),
    ],
)
async def test_mv01_server_info_carries_only_the_fields_of_the_negotiated_revision(
    demo_a, version, expected_keys
):
    result = await result_of(make_ctx(demo_a, session=None), "initialize", init_params(version))
    assert set(result["serverInfo"]) == expected_keys
    if version == "2025-11-25":
        assert result["serverInfo"]["icons"] == [ICON]
        assert result["serverInfo"]["websiteUrl"] == "https://example.com"


async def test_lc09_ping_is_answered_before_initialize(tenant_a):
    for ctx in (make_ctx(tenant_a, session=None), make_ctx(tenant_a, version="2024-11-05", session=None)):
        assert await result_of(ctx, "ping") == {}
        assert await result_of(ctx, "ping", {"_meta": {"progressToken": 1}}) == {}


async def test_lc09_ping_is_answered_on_a_session_not_yet_initialized(tenant_a):
    ctx = make_ctx(tenant_a)
    ctx.session.initialized = False
    assert await result_of(ctx, "ping") == {}


async def test_lc08_the_initialized_notification_marks_the_session_ready(tenant_a):
    ctx = make_ctx(tenant_a)
    ctx.session.initialized = False
    assert await dispatch(ctx, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert ctx.session.initialized is True


async def test_lc08_the_initialized_notification_without_a_session_is_accepted(tenant_a):
    assert (
        await dispatch(
            make_ctx(tenant_a, session=None), {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        is None
    )
