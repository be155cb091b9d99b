"""2026-07-28 requests a real client would never send, each with its exact answer.

The rules are the revision's (basic/transports/streamable-http "Request Metadata", "Server
Validation", basic/versioning); every row names its HTTP status and JSON-RPC code. After the table,
isolation and session rows: a modern request never reads, writes or mints a session.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_app.core.versions import ALL_VERSIONS, V2026_07_28
from mcp_app.models import Tool
from mcp_app.protocol.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_app.streams import sessions
from tests.transport.support import BOTH, Client, call

pytestmark = pytest.mark.django_db(transaction=True)

META = {
    "io.modelcontextprotocol/protocolVersion": V2026_07_28,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
}
NAMES = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
TASKS_META = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def body(method: str, params: dict[str, Any] | None = None, meta: Any = META, id: Any = 1) -> dict[str, Any]:
    params = dict(params or {})
    if meta is not None:
        params["_meta"] = meta
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id is not None:
        message["id"] = id
    return message


def headers_for(message: dict[str, Any], **overrides: str | None) -> dict[str, str]:
    """What a conforming client sends with `message`; an override of None leaves a header out."""
    headers = {"mcp-protocol-version": V2026_07_28, "mcp-method": message.get("method", "")}
    key = NAMES.get(message.get("method", ""))
    if key and isinstance(message["params"].get(key), str):
        headers["mcp-name"] = message["params"][key]
    for name, value in overrides.items():
        name = name.replace("_", "-")
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return headers


async def send(message: Any, headers: dict[str, str], slug: str = "tenant-a", raw: bytes | None = None):
    payload = raw if raw is not None else json.dumps(message).encode()
    merged = {"accept": BOTH, "content-type": "application/json", **headers}
    return await call("POST", f"/t/{slug}/mcp", payload, merged)


ECHO = body("tools/call", {"name": "echo", "arguments": {"message": "hi"}})

# (id, message, header overrides, status, code)
ROWS: list[tuple[str, dict[str, Any], dict[str, str | None], int, int]] = [
    ("no _meta", body("tools/list", meta=None), {}, 400, INVALID_PARAMS),
    ("_meta not an object", body("tools/list", meta=["x"]), {}, 400, INVALID_PARAMS),
    (
        "no client capabilities",
        body("tools/list", meta={"io.modelcontextprotocol/protocolVersion": V2026_07_28}),
        {},
        400,
        INVALID_PARAMS,
    ),
    (
        "capabilities not an object",
        body("tools/list", meta={**META, **{"io.modelcontextprotocol/clientCapabilities": 1}}),
        {},
        400,
        INVALID_PARAMS,
    ),
    (
        "unknown log level",
        body("tools/list", meta={**META, "io.modelcontextprotocol/logLevel": "loud"}),
        {},
        400,
        INVALID_PARAMS,
    ),
    ("version header missing", ECHO, {"mcp-protocol-version": None}, 400, HEADER_MISMATCH),
    (
        "version header differs",
        body("tools/list"),
        {"mcp-protocol-version": "2025-11-25"},
        400,
        HEADER_MISMATCH,
    ),
    ("method header missing", ECHO, {"mcp-method": None}, 400, HEADER_MISMATCH),
    ("method header differs", ECHO, {"mcp-method": "tools/list"}, 400, HEADER_MISMATCH),
    ("method header differs in case only", ECHO, {"mcp-method": "Tools/Call"}, 400, HEADER_MISMATCH),
    ("name header missing", ECHO, {"mcp-name": None}, 400, HEADER_MISMATCH),
    ("name header differs", ECHO, {"mcp-name": "count"}, 400, HEADER_MISMATCH),
    ("name header malformed base64", ECHO, {"mcp-name": "=?base64?%%%?="}, 400, HEADER_MISMATCH),
    ("name header base64 of another name", ECHO, {"mcp-name": "=?base64?Y291bnQ=?="}, 400, HEADER_MISMATCH),
    ("oversized name header", ECHO, {"mcp-name": "e" * 20_000}, 400, HEADER_MISMATCH),
    (
        "uri header differs",
        body("resources/read", {"uri": "file:///a.txt"}),
        {"mcp-name": "file:///b.txt"},
        400,
        HEADER_MISMATCH,
    ),
    (
        "task id header differs",
        body("tasks/get", {"taskId": "abc"}, meta=TASKS_META),
        {"mcp-name": "xyz"},
        400,
        HEADER_MISMATCH,
    ),
    (
        "task id header missing",
        body("tasks/cancel", {"taskId": "abc"}, meta=TASKS_META),
        {"mcp-name": None},
        400,
        HEADER_MISMATCH,
    ),
    (
        "task id header differs on tasks/update",
        body("tasks/update", {"taskId": "abc", "inputResponses": {}}, meta=TASKS_META),
        {"mcp-name": "=?base64?eHl6?="},
        400,
        HEADER_MISMATCH,
    ),
    ("an unknown task", body("tasks/get", {"taskId": "abc"}, meta=TASKS_META), {}, 400, INVALID_PARAMS),
    (
        "tasks/get without the tasks extension",
        body("tasks/get", {"taskId": "abc"}),
        {},
        400,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
    ),
    (
        "tasks/update without the tasks extension",
        body("tasks/update", {"taskId": "abc", "inputResponses": {}}),
        {},
        400,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
    ),
    (
        "tasks/cancel without the tasks extension",
        body("tasks/cancel", {"taskId": "abc"}),
        {},
        400,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
    ),
    (
        "unsupported version",
        body("tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
        {"mcp-protocol-version": "2099-01-01"},
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
    ),
    (
        "a legacy version without a session",
        body("tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
        {"mcp-protocol-version": "2025-11-25"},
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
    ),
    ("initialize", body("initialize", {"protocolVersion": V2026_07_28}), {}, 404, METHOD_NOT_FOUND),
    ("ping", body("ping"), {}, 404, METHOD_NOT_FOUND),
    ("logging/setLevel", body("logging/setLevel", {"level": "debug"}), {}, 404, METHOD_NOT_FOUND),
    ("resources/subscribe", body("resources/subscribe", {"uri": "file:///a.txt"}), {}, 404, METHOD_NOT_FOUND),
    (
        "resources/unsubscribe",
        body("resources/unsubscribe", {"uri": "file:///a.txt"}),
        {},
        404,
        METHOD_NOT_FOUND,
    ),
    ("a method no revision has", body("tools/destroy"), {}, 404, METHOD_NOT_FOUND),
    ("an unknown resource", body("resources/read", {"uri": "file:///none"}), {}, 400, INVALID_PARAMS),
    ("an unknown tool", body("tools/call", {"name": "nope", "arguments": {}}), {}, 400, INVALID_PARAMS),
    ("listen without a filter", body("subscriptions/listen"), {}, 400, INVALID_PARAMS),
    (
        "listen with a malformed filter",
        body("subscriptions/listen", {"notifications": {"resourceSubscriptions": "file:///a.txt"}}),
        {},
        400,
        INVALID_PARAMS,
    ),
]


@pytest.mark.parametrize(("row", "message", "overrides", "status", "code"), ROWS, ids=[r[0] for r in ROWS])
async def test_modern_hostile_request_gets_its_exact_answer(tools_a, row, message, overrides, status, code):
    response = await send(message, headers_for(message, **overrides))
    assert response.status == status, response.body
    reply = response.json()
    assert reply["error"]["code"] == code
    assert reply["id"] == message.get("id")
    assert reply["error"]["message"]  # a readable reason, never empty
    assert "mcp-session-id" not in response.headers


async def test_an_unsupported_version_names_every_served_version_and_the_requested_one(tools_a):
    message = body("tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    response = await send(message, headers_for(message, mcp_protocol_version="2099-01-01"))
    assert response.json()["error"]["data"] == {"supported": list(ALL_VERSIONS), "requested": "2099-01-01"}


async def test_an_unknown_resource_names_its_uri_in_the_error_data(tools_a):
    message = body("resources/read", {"uri": "file:///none"})
    response = await send(message, headers_for(message))
    assert response.json()["error"]["data"] == {"uri": "file:///none"}


async def test_header_names_are_case_insensitive_values_trimmed_and_base64_names_decoded(tools_a):
    headers = {
        "MCP-Protocol-Version": f" {V2026_07_28} ",
        "MCP-METHOD": "tools/call",
        "Mcp-Name": "=?base64?ZWNobw==?=",  # "echo"
    }
    response = await send(ECHO, headers)
    assert response.status == 200, response.body
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"echo": "hi"}


async def test_a_routing_header_sent_twice_is_a_header_mismatch(tools_a):
    raw = json.dumps(ECHO).encode()
    merged = {"accept": BOTH, "content-type": "application/json", **headers_for(ECHO)}
    once = await call("POST", "/t/tenant-a/mcp", raw, merged)
    assert once.status == 200
    twice = await call("POST", "/t/tenant-a/mcp", raw, merged, repeated=[(b"mcp-method", b"tools/call")])
    assert twice.status == 400
    assert twice.json()["error"]["code"] == HEADER_MISMATCH
    assert "more than once" in twice.json()["error"]["message"]


async def test_a_notification_is_accepted_with_202_and_no_body(tools_a):
    message = body("notifications/cancelled", {"requestId": 7}, id=None)
    response = await send(message, {"mcp-protocol-version": V2026_07_28})
    assert response.status == 202
    assert response.body == b""


@pytest.mark.parametrize(
    ("what", "payload"),
    [
        ("a batch", [ECHO]),
        ("a response", {"jsonrpc": "2.0", "id": 1, "result": {}}),
        ("no jsonrpc member", {k: v for k, v in ECHO.items() if k != "jsonrpc"}),
    ],
)
async def test_anything_but_one_request_or_notification_is_an_invalid_request(tools_a, what, payload):
    response = await send(payload, headers_for(ECHO))
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_naming_the_modern_version_are_405(tools_a, method):
    response = await call(
        method, "/t/tenant-a/mcp", b"", {"accept": BOTH, "mcp-protocol-version": V2026_07_28}
    )
    assert response.status == 405
    assert "POST" in response.headers["allow"]


async def test_a_modern_request_carrying_another_clients_session_id_is_served_without_touching_it(
    tools_a, tenant_b
):
    legacy = Client("tenant-a")
    await legacy.initialize()
    before = (await sessions.get_store().get(legacy.session_id)).to_dict()
    message = body("tools/call", {"name": "echo", "arguments": {"message": "mine"}})
    response = await send(message, {**headers_for(message), "mcp-session-id": legacy.session_id})
    assert response.status == 200
    assert response.json()["result"]["structuredContent"] == {"echo": "mine"}
    assert "mcp-session-id" not in response.headers
    assert (await sessions.get_store().get(legacy.session_id)).to_dict() == before
    # And the session still serves its own client.
    listed = await legacy.request("tools/list")
    assert listed.status == 200


async def test_a_header_naming_another_tenants_tool_answers_like_a_missing_tool(tools_a, tenant_b):
    await Tool.objects.acreate(
        tenant=tenant_b,
        name="secret_b",
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
        handler="python",
        handler_config={"callable": "echo"},
    )
    foreign = body("tools/call", {"name": "secret_b", "arguments": {"region": "eu"}})
    missing = body("tools/call", {"name": "no_such_tool", "arguments": {"region": "eu"}})
    answers = []
    for message in (foreign, missing):
        response = await send(message, {**headers_for(message), "mcp-param-region": "eu"})
        error = response.json()["error"]
        answers.append(
            (response.status, error["code"], error["message"].replace(message["params"]["name"], "X"))
        )
    assert answers[0] == answers[1] == (400, INVALID_PARAMS, "Unknown tool: X")


@pytest.fixture
def mirrored_tool(tools_a):
    return Tool.objects.create(
        tenant=tools_a,
        name="route",
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "shard": {"type": "integer", "x-mcp-header": "Shard"},
                "message": {"type": "string"},
            },
        },
        handler="python",
        handler_config={"callable": "echo"},
    )


ROUTE = body(
    "tools/call", {"name": "route", "arguments": {"region": "us-west1", "shard": 42, "message": "hi"}}
)


@pytest.mark.parametrize(
    ("what", "params", "status"),
    [
        ("both headers match", {"mcp-param-region": "us-west1", "mcp-param-shard": "42"}, 200),
        (
            "numeric header compared as a number",
            {"mcp-param-region": "us-west1", "mcp-param-shard": "42.0"},
            200,
        ),
        (
            "base64 form of the value",
            {"mcp-param-region": "=?base64?dXMtd2VzdDE=?=", "mcp-param-shard": "42"},
            200,
        ),
        ("a header left out", {"mcp-param-region": "us-west1"}, 400),
        ("a header that differs", {"mcp-param-region": "eu-west1", "mcp-param-shard": "42"}, 400),
        ("malformed base64", {"mcp-param-region": "=?base64?***?=", "mcp-param-shard": "42"}, 400),
        ("oversized value", {"mcp-param-region": "x" * 50_000, "mcp-param-shard": "42"}, 400),
    ],
)
async def test_mcp_param_headers_must_mirror_the_arguments(mirrored_tool, what, params, status):
    response = await send(ROUTE, {**headers_for(ROUTE), **params})
    assert response.status == status, response.body
    if status == 400:
        error = response.json()["error"]
        assert error["code"] == HEADER_MISMATCH
        assert "Mcp-Param-" in error["message"]


async def test_a_mirrored_tool_called_through_call_tool_needs_no_headers_of_its_arguments(
    mirrored_tool, tools_a
):
    """Search mode (AMB-376): the request's own arguments are call_tool's, which mirror nothing; the named
    tool's arguments are inside them, where no intermediary routes on them."""
    tools_a.tool_discovery = "search"
    await sync_to_async(tools_a.save)()
    arguments = {"region": "us-west1", "shard": 42, "message": "hi"}
    message = body(
        "tools/call", {"name": "call_tool", "arguments": {"name": "route", "arguments": arguments}}
    )
    response = await send(message, headers_for(message))
    assert response.status == 200, response.body
    assert response.json()["result"]["content"][0]["text"] == "hi"
