"""Base protocol: JSON-RPC shape, ids, notifications, the error funnel (checklist §1)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.protocol import dispatch as dispatch_module
from mcp_app.protocol.dispatch import classify, dispatch, is_initialize
from mcp_app.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    InvalidRequest,
)
from tests.support import make_ctx


@pytest.fixture
def ctx(tenant_a):
    return make_ctx(tenant_a)


@pytest.mark.parametrize("request_id", ["abc", "1", 1, 0, -5, 2**53])
async def test_bp04_request_id_is_echoed_with_the_same_type_and_value(ctx, request_id):
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert reply == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    assert type(reply["id"]) is type(request_id)


@pytest.mark.parametrize("request_id", [None, True, False, 1.5, [], {}])
async def test_bp04_null_bool_fractional_or_structured_ids_are_invalid_requests_answered_with_null_id(
    ctx, request_id
):
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert reply["id"] is None
    assert reply["error"]["code"] == INVALID_REQUEST


async def test_bp06_a_response_carries_exactly_one_of_result_and_error(ctx):
    ok = await dispatch(ctx, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    failed = await dispatch(ctx, {"jsonrpc": "2.0", "id": 2, "method": "no/such"})
    assert "result" in ok and "error" not in ok
    assert "error" in failed and "result" not in failed
    assert set(failed["error"]) <= {"code", "message", "data"}
    assert isinstance(failed["error"]["code"], int) and failed["error"]["message"]


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
    ],
)
async def test_bp02_malformed_messages_are_invalid_requests(ctx, message):
    reply = await dispatch(ctx, message)
    assert reply["error"]["code"] == INVALID_REQUEST


async def test_bp02_an_invalid_request_with_a_usable_id_is_answered_with_that_id(ctx):
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": "r1", "method": "ping", "params": [1, 2]})
    assert reply["id"] == "r1"
    assert reply["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize("message", [[], "ping", 42, None])
async def test_bp02_a_message_that_is_not_an_object_is_an_invalid_request_with_null_id(ctx, message):
    reply = await dispatch(ctx, message)
    assert reply == {"jsonrpc": "2.0", "id": None, "error": reply["error"]}
    assert reply["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "method",
    [
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
        "notifications/unknown",
        "tools/list",  # a request method sent as a notification is still a notification
    ],
)
async def test_bp08_notifications_get_no_response(ctx, method):
    assert await dispatch(ctx, {"jsonrpc": "2.0", "method": method, "params": {}}) is None


async def test_bp08_a_failing_notification_handler_still_gets_no_response(ctx, monkeypatch):
    async def broken(ctx, params):
        raise RuntimeError("boom")

    monkeypatch.setitem(dispatch_module.NOTIFICATIONS, "notifications/initialized", broken)
    assert await dispatch(ctx, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "result": {}},
        {"jsonrpc": "2.0", "id": "s-1", "error": {"code": -32601, "message": "nope"}},
    ],
)
async def test_mi03_client_responses_get_no_response(ctx, message):
    assert await dispatch(ctx, message) is None


async def test_mi01_an_unknown_method_gets_method_not_found(ctx):
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": 3, "method": "tools/delete"})
    assert reply["error"]["code"] == METHOD_NOT_FOUND


async def test_lg06_an_unexpected_exception_becomes_a_generic_internal_error_without_internals(
    ctx, monkeypatch, caplog
):
    async def broken(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("database password is hunter2")

    monkeypatch.setitem(dispatch_module.METHODS, "ping", dispatch_module.Method(broken, modern=False))
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert reply["id"] == 9
    assert reply["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert "hunter2" in caplog.text  # logged for the operator, never sent to the client


async def test_an_overlong_method_name_is_not_echoed_unbounded(ctx):
    reply = await dispatch(ctx, {"jsonrpc": "2.0", "id": 1, "method": "x" * 100_000})
    assert reply["error"]["code"] == METHOD_NOT_FOUND
    assert len(reply["error"]["message"]) <= 500


def test_classify_tells_requests_notifications_and_responses_apart():
    assert classify({"jsonrpc": "2.0", "id": 1, "method": "ping"}) == "request"
    assert classify({"jsonrpc": "2.0", "method": "notifications/initialized"}) == "notification"
    assert classify({"jsonrpc": "2.0", "id": 1, "result": {}}) == "response"
    assert classify({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}}) == "response"
    with pytest.raises(InvalidRequest):
        classify({"jsonrpc": "2.0", "id": None, "method": "ping"})
    with pytest.raises(InvalidRequest):
        classify(["not", "an", "object"])


def test_is_initialize_recognises_only_the_initialize_request():
    assert is_initialize({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert not is_initialize({"jsonrpc": "2.0", "method": "initialize"})
    assert not is_initialize({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert not is_initialize("initialize")
