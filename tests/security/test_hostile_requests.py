"""A table of malformed and hostile requests sent to the real ASGI application.

Each row states its exact answer: the HTTP status, the JSON-RPC error code (None: no error object;
for 4xx statuses None means a plain-text body) and, where it matters, the id echoed back and a check
on the body. After every row a fresh session must still `initialize` and call `echo`: no hostile
request may break the server for the next client. Expected answers follow the spec and the
README's transport decisions (AMB-6..12); a failing row is a bug in the server, not in the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from mcp_app.core.versions import SUPPORTED_VERSIONS
from mcp_app.models import McpSession
from mcp_app.protocol.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
)
from tenants.models import Tenant
from tests.security.conftest import make_foreign, make_sleeping, seed_demo
from tests.transport.support import BOTH, Client, Response, call

# The rows only read what the module's tenants hold: seeded once for the module (`tenants`), not flushed
# and seeded again for each of 126 rows (230 worker-seconds of a loaded CI run; 62 s alone on PostgreSQL,
# 50 of them that).

DEMO = "/t/demo/mcp"
V0326 = "2025-03-26"
V0618 = "2025-06-18"
ANY = object()  # the reply's id is not checked

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": V0618,
        "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"},
    },
}

# Placeholders resolved per row: a live demo session, a live session of another tenant, a cursor
# issued by another tenant's tools/list.
SESSION = "$SESSION"
OTHER_SESSION = "$OTHER_SESSION"
FOREIGN_CURSOR = "$FOREIGN_CURSOR"
UNKNOWN_SESSION = "Qm9ndXMtc2Vzc2lvbi1pZC10aGF0LW5ldmVyLWV4aXN0ZWQ"


def rpc(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call_tool(name: str, arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


def read(uri: str) -> dict[str, Any]:
    return rpc("resources/read", {"uri": uri})


@dataclass(frozen=True)
class Row:
    """One hostile request and its exact expected answer."""

    id: str
    body: Any = None  # JSON value; bytes are sent as they are; a callable builds either lazily
    status: int = 200
    code: int | None = None
    method: str = "POST"
    path: str = DEMO
    headers: dict[str, str | None] = field(default_factory=dict)  # None removes a default header
    session: str | None = V0618  # the version of a live session the request carries, None: no session
    reply_id: Any = ANY
    says: str | None = None  # a phrase the error message (or text body) must contain
    check: Callable[[Response], None] | None = None
    settings: dict[str, Any] = field(default_factory=dict)


# --- body checks --------------------------------------------------------------------------------


def tool_text(response: Response) -> str:
    result = response.json()["result"]
    assert result.get("isError") is not True, result
    return result["content"][0]["text"]


def greets_literally(name: str) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        assert tool_text(response) == f"Hello, {name}!"
        assert django_settings.SECRET_KEY not in response.body.decode()

    return check


def is_tool_error(phrase: str) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        result = response.json()["result"]
        assert result["isError"] is True, result
        assert phrase in result["content"][0]["text"]

    return check


def echoes(message: str) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        result = response.json()["result"]
        assert result.get("isError") is not True
        assert result["structuredContent"] == {"echo": message}

    return check


def error_data_uri(uri: str) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        assert response.json()["error"]["data"]["uri"] == uri
        assert "root:" not in response.body.decode()

    return check


def profile_of(user_id: str) -> Callable[[Response], None]:
    """The template resource is rendered as valid JSON naming exactly `user_id`, nothing read from disk."""

    def check(response: Response) -> None:
        contents = response.json()["result"]["contents"]
        assert len(contents) == 1
        assert json.loads(contents[0]["text"]) == {"user_id": user_id, "name": f"User {user_id}"}
        assert "root:" not in response.body.decode()
        assert django_settings.SECRET_KEY not in response.body.decode()

    return check


def prompt_keeps(code: str) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        text = response.json()["result"]["messages"][0]["content"]["text"]
        assert text.endswith(code)
        assert django_settings.SECRET_KEY not in response.body.decode()

    return check


def short_error_message(response: Response) -> None:
    assert len(response.json()["error"]["message"]) <= 600


def empty_result(response: Response) -> None:
    assert response.json()["result"] == {}


def counter_offers_a_supported_version(response: Response) -> None:
    assert response.json()["result"]["protocolVersion"] in SUPPORTED_VERSIONS
    assert response.headers["mcp-session-id"]


def allows_post(response: Response) -> None:
    assert "POST" in response.headers["allow"]


DEEP = 10_000


def nested_arguments() -> bytes:
    deep = '{"a":' * DEEP + "1" + "}" * DEEP
    return (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",'
        f'"arguments":{{"message":"x","deep":{deep}}}}}}}'
    ).encode()


def deep_arguments(levels: int, modern: bool = False) -> Callable[[], bytes]:
    """A tools/call of echo whose extra argument nests `levels` arrays (the whole message: 3 more)."""

    def build() -> bytes:
        meta = ',"_meta":' + json.dumps(MODERN_META) if modern else ""
        deep = "[" * levels + "]" * levels
        return (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",'
            f'"arguments":{{"message":"x","deep":{deep}}}{meta}}}}}'
        ).encode()

    return build


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_HEADERS: dict[str, str | None] = {
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "echo",
}
LIMIT = 64  # MCP_MAX_JSON_DEPTH's default (AMB-115): the message itself is 3 of the levels
BRACKETS = "[{" * DEEP
HUGE = 3 * 1024 * 1024

ROWS: list[Row] = [
    # --- JSON parsing (BP-03, AMB-9: 400 with -32700 and "id": null) -----------------------------
    Row("bad_json", b'{"jsonrpc": "2.0", "id": 1, "method": ping}', 400, PARSE_ERROR, reply_id=None),
    Row("truncated_json", b'{"jsonrpc": "2.0", "id": 1, "method": "pi', 400, PARSE_ERROR, reply_id=None),
    Row(
        "invalid_utf8",
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff\xfe\xc0"}}',
        400,
        PARSE_ERROR,
        reply_id=None,
        says="UTF-8",
    ),
    Row("utf16_body", json.dumps(rpc("ping")).encode("utf-16"), 400, PARSE_ERROR, reply_id=None),
    Row("nan_constant", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', 400, PARSE_ERROR),
    Row("empty_body", b"", 400, PARSE_ERROR, reply_id=None),
    Row("whitespace_body", b" \r\n\t ", 400, PARSE_ERROR, reply_id=None),
    Row("json_string", "ping", 400, INVALID_REQUEST, reply_id=None),
    Row("json_number", 42, 400, INVALID_REQUEST, reply_id=None),
    Row("json_null", b"null", 400, INVALID_REQUEST, reply_id=None),
    Row("json_true", True, 400, INVALID_REQUEST, reply_id=None),
    Row("empty_array", [], 400, INVALID_REQUEST, reply_id=None, says="empty batch"),
    Row("deeply_nested_arrays", b"[" * DEEP + b"]" * DEEP, 400, PARSE_ERROR, reply_id=None, says="nested"),
    Row("deeply_nested_arguments", nested_arguments, 400, PARSE_ERROR, reply_id=None, says="nested"),
    # AMB-115: far past the limit on both eras, a whole megabyte of "[", and exactly at the limit.
    Row(
        "nested_100000_deep",
        b"[" * 100_000 + b"]" * 100_000,
        400,
        PARSE_ERROR,
        reply_id=None,
        says="64 levels",
    ),
    Row(
        "nested_100000_deep_objects", b'{"a":' * 100_000 + b"1" + b"}" * 100_000, 400, PARSE_ERROR, says="64"
    ),
    Row(
        "nested_100000_deep_modern",
        deep_arguments(100_000, modern=True),
        400,
        PARSE_ERROR,
        headers=MODERN_HEADERS,
        session=None,
        reply_id=None,
        says="64 levels",
    ),
    Row("a_megabyte_of_open_brackets", b"[" * 1_000_000, 400, PARSE_ERROR, reply_id=None, says="64 levels"),
    # At the limit the message is parsed and reaches the tool (whose schema refuses the extra argument).
    Row(
        "nesting_at_the_limit_is_parsed",
        deep_arguments(LIMIT - 3),
        check=is_tool_error("'deep' was unexpected"),
    ),
    Row("nesting_one_past_the_limit", deep_arguments(LIMIT - 2), 400, PARSE_ERROR, says="64 levels"),
    Row(
        "nesting_at_the_limit_is_parsed_modern",
        deep_arguments(LIMIT - 3, modern=True),
        headers=MODERN_HEADERS,
        session=None,
        check=is_tool_error("'deep' was unexpected"),
    ),
    # Escaped quotes then brackets: one unterminated string (the old scan retried it from every quote).
    Row(
        "escaped_quotes_then_brackets_are_one_unterminated_string",
        b'"' + b'\\"' * 20_000 + b"[" * 100,
        400,
        PARSE_ERROR,
        reply_id=None,
        says="Unterminated string",
    ),
    Row(
        "brackets_inside_a_string_are_not_nesting",
        call_tool("echo", {"message": BRACKETS}),
        check=echoes(BRACKETS),
    ),
    # --- JSON-RPC framing (BP-02, BP-04, AMB-11: a usable id comes back, else null) --------------
    Row("jsonrpc_1_0", {"jsonrpc": "1.0", "id": 7, "method": "ping"}, 400, INVALID_REQUEST, reply_id=7),
    Row("jsonrpc_missing", {"id": 7, "method": "ping"}, 400, INVALID_REQUEST, reply_id=7, says='"jsonrpc"'),
    Row("jsonrpc_number", {"jsonrpc": 2.0, "id": 7, "method": "ping"}, 400, INVALID_REQUEST, reply_id=7),
    Row("method_missing", {"jsonrpc": "2.0", "id": 8}, 400, INVALID_REQUEST, reply_id=8),
    Row("method_not_a_string", rpc(42, id=9), 400, INVALID_REQUEST, reply_id=9, says='"method"'),  # type: ignore[arg-type]
    Row("method_empty", rpc("", id=9), 400, INVALID_REQUEST, reply_id=9),
    Row("id_null", rpc("ping", id=None), 400, INVALID_REQUEST, reply_id=None, says='"id"'),
    Row("id_true", rpc("ping", id=True), 400, INVALID_REQUEST, reply_id=None, says='"id"'),
    Row("id_float", rpc("ping", id=1.5), 400, INVALID_REQUEST, reply_id=None, says='"id"'),
    Row("id_object", rpc("ping", id={"a": 1}), 400, INVALID_REQUEST, reply_id=None, says='"id"'),
    Row("id_array", rpc("ping", id=[1]), 400, INVALID_REQUEST, reply_id=None, says='"id"'),
    Row("id_huge_integer_is_echoed", rpc("ping", id=10**30), reply_id=10**30, check=empty_result),
    Row("id_string_is_echoed", rpc("ping", id="é-\u2028-</script>"), reply_id="é-\u2028-</script>"),
    Row(
        "params_array",
        {**rpc("ping", id=10), "params": [1]},
        400,
        INVALID_REQUEST,
        reply_id=10,
        says='"params"',
    ),
    Row("params_string", {**rpc("ping", id=10), "params": "x"}, 400, INVALID_REQUEST, reply_id=10),
    Row("unknown_method", rpc("rpc.discover"), 200, METHOD_NOT_FOUND, reply_id=1),
    Row(
        "huge_unknown_method_is_not_echoed_whole",
        rpc("x" * 100_000),
        200,
        METHOD_NOT_FOUND,
        check=short_error_message,
    ),
    Row("nul_in_method", rpc("tools/list\u0000"), 200, METHOD_NOT_FOUND),
    # --- body size (AMB-9: 413 by Content-Length and while reading) ------------------------------
    Row(
        "oversized_body",
        call_tool("echo", {"message": "x" * 4096}),
        413,
        settings={"MCP_MAX_BODY_BYTES": 2048},
        says="larger than 2048 bytes",
    ),
    Row("content_length_overstated", rpc("ping"), 413, headers={"content-length": "999999999"}),
    Row(
        "content_length_understated_over_limit",
        call_tool("echo", {"message": "x" * 4096}),
        413,
        headers={"content-length": "10"},
        settings={"MCP_MAX_BODY_BYTES": 2048},
    ),
    # The ASGI server frames the body; a header that disagrees with it never truncates what was read.
    Row(
        "content_length_understated_small_body",
        rpc("ping"),
        headers={"content-length": "5"},
        check=empty_result,
    ),
    Row("huge_string_argument", lambda: call_tool("echo", {"message": "x" * HUGE}), check=echoes("x" * HUGE)),
    Row(
        "huge_string_into_a_template_tool",
        lambda: call_tool("greet", {"name": "y" * (2 * 1024 * 1024)}),
        check=is_tool_error("longer than 1048576 characters"),
    ),
    Row(
        "lone_surrogate_argument",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"\\ud800"}}}',
        check=echoes("\ud800"),
    ),
    # --- Accept / Content-Type (AMB-9) -----------------------------------------------------------
    Row(
        "accept_json_only",
        rpc("ping"),
        406,
        INVALID_REQUEST,
        headers={"accept": "application/json"},
        says="Accept",
    ),
    Row(
        "accept_event_stream_only", rpc("ping"), 406, INVALID_REQUEST, headers={"accept": "text/event-stream"}
    ),
    Row("accept_missing", rpc("ping"), 406, INVALID_REQUEST, headers={"accept": None}),
    Row("accept_wildcard_is_enough", rpc("ping"), headers={"accept": "*/*"}, check=empty_result),
    Row("content_type_text_plain", rpc("ping"), 415, INVALID_REQUEST, headers={"content-type": "text/plain"}),
    Row("content_type_missing", rpc("ping"), 415, INVALID_REQUEST, headers={"content-type": None}),
    Row(
        "content_type_form",
        b"jsonrpc=2.0&id=1&method=ping",
        415,
        INVALID_REQUEST,
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    Row(
        "content_type_with_charset", rpc("ping"), headers={"content-type": "application/json; charset=utf-8"}
    ),
    # --- Host / Origin (HT-02, AMB-10) -----------------------------------------------------------
    Row(
        "origin_foreign",
        rpc("ping"),
        403,
        INVALID_REQUEST,
        headers={"origin": "https://evil.example"},
        says="Origin",
    ),
    Row("origin_null", rpc("ping"), 403, INVALID_REQUEST, headers={"origin": "null"}),
    Row(
        "origin_lookalike",
        rpc("ping"),
        403,
        INVALID_REQUEST,
        headers={"origin": "http://127.0.0.1:8000.evil.example"},
    ),
    Row("host_unknown", rpc("ping"), 400, headers={"host": "rebound.evil.example"}, says="Host"),
    Row(
        "options_from_a_foreign_origin",
        None,
        403,
        INVALID_REQUEST,
        method="OPTIONS",
        session=None,
        headers={"origin": "https://evil.example"},
    ),
    # --- sessions and versions (HT-38, HT-39, HT-47, AMB-5..7) -----------------------------------
    Row(
        "session_unknown",
        rpc("ping"),
        404,
        INVALID_REQUEST,
        headers={"mcp-session-id": UNKNOWN_SESSION},
        reply_id=1,
    ),
    Row("session_missing", rpc("ping"), 400, INVALID_REQUEST, session=None, says="Mcp-Session-Id"),
    Row(
        "session_of_another_tenant",
        rpc("ping"),
        404,
        INVALID_REQUEST,
        headers={"mcp-session-id": OTHER_SESSION},
    ),
    Row("session_id_non_ascii", rpc("ping"), 404, INVALID_REQUEST, headers={"mcp-session-id": SESSION + "é"}),
    Row(
        "session_id_control_chars",
        rpc("ping"),
        404,
        INVALID_REQUEST,
        headers={"mcp-session-id": SESSION + "\x00\x1b"},
    ),
    Row("session_id_glob", rpc("ping"), 404, INVALID_REQUEST, headers={"mcp-session-id": "*"}),
    Row(
        "session_id_legacy_prefix",
        rpc("ping"),
        404,
        INVALID_REQUEST,
        headers={"mcp-session-id": "L." + UNKNOWN_SESSION},
    ),
    Row("session_id_too_long", rpc("ping"), 404, INVALID_REQUEST, headers={"mcp-session-id": "a" * 65}),
    Row(
        "protocol_version_unsupported",
        rpc("ping"),
        400,
        INVALID_REQUEST,
        headers={"mcp-protocol-version": "1999-01-01"},
        says="Unsupported",
    ),
    Row(
        "server_discover_without_the_2026_07_28_envelope_nor_a_session",
        rpc("server/discover"),
        400,
        METHOD_NOT_FOUND,
        session=None,
        says="needs the MCP 2026-07-28 envelope",
    ),
    Row("batch_in_a_2025_06_18_session", [rpc("ping")], 400, INVALID_REQUEST, says="batch"),
    Row(
        "batch_with_initialize_in_a_2025_03_26_session",
        [INIT, rpc("ping")],
        400,
        INVALID_REQUEST,
        session=V0326,
        says="initialize",
    ),
    Row(
        "batch_of_junk_in_a_2025_03_26_session",
        [1, "x"],
        200,
        INVALID_REQUEST,
        session=V0326,
        check=lambda r: [e["id"] for e in r.json()] == [None, None],
    ),
    Row("reinitialize_a_live_session", INIT, 200, INVALID_REQUEST, reply_id=0, says="already initialized"),
    Row(
        "initialize_with_an_unknown_session",
        INIT,
        404,
        INVALID_REQUEST,
        headers={"mcp-session-id": UNKNOWN_SESSION},
    ),
    Row(
        "initialize_params_not_an_object",
        {**INIT, "params": [V0618]},
        400,
        INVALID_REQUEST,
        session=None,
        reply_id=0,
    ),
    Row(
        "initialize_without_protocol_version",
        {**INIT, "params": {"capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        200,
        INVALID_PARAMS,
        session=None,
        reply_id=0,
    ),
    Row(
        "initialize_with_an_unknown_version",
        {**INIT, "params": {**INIT["params"], "protocolVersion": "1999-01-01"}},
        session=None,
        check=counter_offers_a_supported_version,
    ),
    # --- tools (TL-06, TL-07, AMB-16) -----------------------------------------------------------
    Row("tools_call_unknown_tool", call_tool("no_such_tool", {}), 200, INVALID_PARAMS, reply_id=1),
    Row(
        "tools_call_arguments_failing_the_schema",
        call_tool("echo", {"message": 42}),
        check=is_tool_error("Invalid arguments"),
    ),
    Row("tools_call_arguments_not_an_object", call_tool("echo", "hello"), 200, INVALID_PARAMS),
    Row("tools_call_without_a_name", rpc("tools/call", {"arguments": {}}), 200, INVALID_PARAMS),
    Row("tools_call_name_not_a_string", rpc("tools/call", {"name": ["echo"]}), 200, INVALID_PARAMS),
    # --- pagination (PG-05, PG-06) ---------------------------------------------------------------
    Row("tools_list_garbage_cursor", rpc("tools/list", {"cursor": "garbage"}), 200, INVALID_PARAMS),
    Row("tools_list_cursor_not_a_string", rpc("tools/list", {"cursor": 5}), 200, INVALID_PARAMS),
    Row(
        "tools_list_cursor_of_another_tenant",
        rpc("tools/list", {"cursor": FOREIGN_CURSOR}),
        200,
        INVALID_PARAMS,
    ),
    # --- prompts (PR-04, PR-06) ------------------------------------------------------------------
    Row(
        "prompts_get_missing_required_argument",
        rpc("prompts/get", {"name": "code_review", "arguments": {}}),
        200,
        INVALID_PARAMS,
    ),
    Row(
        "prompts_get_argument_not_a_string",
        rpc("prompts/get", {"name": "code_review", "arguments": {"code": 5}}),
        200,
        INVALID_PARAMS,
    ),
    Row("prompts_get_unknown_prompt", rpc("prompts/get", {"name": "nope"}), 200, INVALID_PARAMS),
    # --- resources (RS-07, RS-09, RS-10) ---------------------------------------------------------
    Row(
        "resources_read_unknown_uri",
        read("demo://nope"),
        200,
        RESOURCE_NOT_FOUND,
        check=error_data_uri("demo://nope"),
    ),
    Row(
        "resources_read_etc_passwd",
        read("file:///etc/passwd"),
        200,
        RESOURCE_NOT_FOUND,
        check=error_data_uri("file:///etc/passwd"),
    ),
    Row(
        "resources_read_template_path_traversal",
        read("demo://users/../../etc/passwd/profile"),
        200,
        RESOURCE_NOT_FOUND,
    ),
    Row(
        "resources_read_template_encoded_traversal_stays_a_name",
        read("demo://users/..%2F..%2Fetc%2Fpasswd/profile"),
        check=profile_of("../../etc/passwd"),
    ),
    Row(
        "resources_read_template_quote_cannot_break_the_json",
        read("demo://users/%22%7D%2C%22x%22%3A%22/profile"),
        check=profile_of('"},"x":"'),
    ),
    Row(
        "resources_read_uri_over_4096_chars",
        read("demo://users/" + "1" * 5000 + "/profile"),
        200,
        RESOURCE_NOT_FOUND,
    ),
    Row(
        "resources_read_uri_not_a_string",
        rpc("resources/read", {"uri": ["demo://readme"]}),
        200,
        INVALID_PARAMS,
    ),
    # --- template injection: arguments are data, never template code (PR-06, handlers sandbox) ---
    Row(
        "greet_secret_key_injection",
        call_tool("greet", {"name": "{{ settings.SECRET_KEY }}"}),
        check=greets_literally("{{ settings.SECRET_KEY }}"),
    ),
    Row(
        "greet_debug_tag_injection",
        call_tool("greet", {"name": "{% debug %}"}),
        check=greets_literally("{% debug %}"),
    ),
    Row(
        "greet_load_tag_injection",
        call_tool("greet", {"name": "{% load log %}{% get_admin_log 10 as x %}"}),
        check=greets_literally("{% load log %}{% get_admin_log 10 as x %}"),
    ),
    Row(
        "greet_request_injection",
        call_tool("greet", {"name": "{{ request }}"}),
        check=greets_literally("{{ request }}"),
    ),
    Row(
        "prompt_argument_injection",
        rpc(
            "prompts/get",
            {"name": "code_review", "arguments": {"code": "{{ settings.SECRET_KEY }}{% debug %}"}},
        ),
        check=prompt_keeps("{{ settings.SECRET_KEY }}{% debug %}"),
    ),
    Row(
        "template_uri_variable_injection",
        read("demo://users/%7B%7B%20request%20%7D%7D/profile"),
        check=profile_of("{{ request }}"),
    ),
    # --- logging and completion (LG-02, AMB-22, CP-03) -------------------------------------------
    Row("logging_set_level_WARN", rpc("logging/setLevel", {"level": "WARN"}), 200, INVALID_PARAMS),
    Row("logging_set_level_not_a_string", rpc("logging/setLevel", {"level": 4}), 200, INVALID_PARAMS),
    Row(
        "completion_bad_ref_type",
        rpc(
            "completion/complete",
            {
                "ref": {"type": "ref/evil", "name": "code_review"},
                "argument": {"name": "language", "value": ""},
            },
        ),
        200,
        INVALID_PARAMS,
    ),
    Row(
        "completion_unknown_prompt",
        rpc(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "language", "value": ""}},
        ),
        200,
        INVALID_PARAMS,
    ),
    Row(
        "completion_ref_not_an_object",
        rpc("completion/complete", {"ref": "code_review", "argument": {"name": "language", "value": ""}}),
        200,
        INVALID_PARAMS,
    ),
    # --- notifications and stray responses (HT-12, UT-11) ----------------------------------------
    Row(
        "cancel_an_unknown_request",
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 424242}},
        202,
    ),
    Row(
        "cancel_with_a_malformed_request_id",
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}}},
        202,
    ),
    Row("unknown_notification", {"jsonrpc": "2.0", "method": "notifications/evil"}, 202),
    Row("result_for_no_pending_request", {"jsonrpc": "2.0", "id": 99, "result": {}}, 202),
    Row(
        "error_for_no_pending_request",
        {"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}},
        202,
    ),
    # --- methods, paths, tenants (HT-26, HT-39, HT-40, AMB-8, AMB-11) ----------------------------
    Row("put", rpc("ping"), 405, method="PUT", check=allows_post),
    Row("patch", rpc("ping"), 405, method="PATCH", check=allows_post),
    Row("unknown_tenant", rpc("ping"), 404, path="/t/nobody/mcp", session=None),
    Row("inactive_tenant", rpc("ping"), 404, path="/t/sleeping/mcp", session=None),
    Row(
        "delete_an_unknown_session",
        None,
        404,
        INVALID_REQUEST,
        method="DELETE",
        headers={"mcp-session-id": UNKNOWN_SESSION},
    ),
    Row("delete_without_a_session", None, 400, INVALID_REQUEST, method="DELETE", session=None),
    Row(
        "get_without_event_stream_accept",
        None,
        406,
        INVALID_REQUEST,
        method="GET",
        headers={"accept": "application/json"},
    ),
    Row("get_without_accept", None, 406, INVALID_REQUEST, method="GET", headers={"accept": None}),
    Row("get_without_a_session", None, 400, INVALID_REQUEST, method="GET", session=None),
    Row(
        "get_with_an_unknown_session",
        None,
        404,
        INVALID_REQUEST,
        method="GET",
        headers={"mcp-session-id": UNKNOWN_SESSION},
    ),
    # --- the legacy endpoints (AMB-13) -----------------------------------------------------------
    Row(
        "legacy_post_without_session_id",
        rpc("ping"),
        400,
        INVALID_REQUEST,
        path="/t/demo/messages",
        session=None,
    ),
    Row(
        "legacy_post_with_a_streamable_session",
        rpc("ping"),
        404,
        INVALID_REQUEST,
        path="/t/demo/messages?session_id=" + SESSION,
    ),
    Row("legacy_sse_put", None, 405, method="PUT", path="/t/demo/sse", session=None),
]


# --- running one row ------------------------------------------------------------------------------


class Env:
    """Live sessions and cursors a row's placeholders stand for."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str):
            for name, real in self.values.items():
                value = value.replace(name, real)
            return value
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value


@pytest.fixture(scope="module")
def tenants(django_db_setup, django_db_blocker) -> Iterator[None]:  # noqa: ANN001 - pytest-django's
    """demo, foreign and sleeping (tests/security/conftest.py), once for the module; then flushed, as a
    transactional test's database is after it."""
    with django_db_blocker.unblock():
        seed_demo(), make_foreign(), make_sleeping()
    yield
    with django_db_blocker.unblock():
        call_command("flush", verbosity=0, interactive=False)


@pytest.fixture(autouse=True)
def _database(tenants, django_db_blocker) -> Iterator[None]:  # noqa: ANN001 - pytest-django's
    """Each test in: the server it calls reads the module's tenants from its own threads. The sessions
    a row opened are ended after it (without Redis they are rows, and 100 per client are the cap)."""
    with django_db_blocker.unblock():
        yield
        McpSession.objects.all().delete()


@pytest.fixture
async def env(settings) -> Env:
    env = Env()
    other = Client("foreign")
    await other.initialize()
    env.values[OTHER_SESSION] = other.session_id or ""
    page_size = settings.MCP_PAGE_SIZE
    settings.MCP_PAGE_SIZE = 1
    listed = await other.request("tools/list")
    settings.MCP_PAGE_SIZE = page_size
    env.values[FOREIGN_CURSOR] = listed.json()["result"]["nextCursor"]
    return env


def encode_body(row: Row, env: Env) -> bytes:
    body = row.body() if callable(row.body) else row.body
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    return json.dumps(env.resolve(body)).encode()


def request_headers(row: Row, client: Client | None, env: Env) -> dict[str, str]:
    headers: dict[str, str] = {}
    if row.method == "POST":
        headers = {"accept": BOTH, "content-type": "application/json"}
    elif row.method == "GET":
        headers = {"accept": "text/event-stream"}
    if client is not None:
        headers.update(client.session_headers())
    for name, value in row.headers.items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = env.resolve(value)
    return headers


def assert_answer(row: Row, response: Response) -> None:
    text = response.body.decode("utf-8", "replace")
    assert response.status == row.status, (response.status, text[:500])
    assert "Traceback" not in text
    message = text
    if row.status == 202:
        assert response.body == b""
    elif row.code is not None:
        assert response.headers["content-type"] == "application/json", response.headers
        payload = response.json()
        entries = payload if isinstance(payload, list) else [payload]
        assert entries
        for entry in entries:
            assert entry["jsonrpc"] == "2.0"
            assert "result" not in entry
            assert entry["error"]["code"] == row.code, entry
        message = entries[0]["error"]["message"]
        if row.reply_id is not ANY:
            assert "id" in payload and payload["id"] == row.reply_id, payload
    elif row.status == 200:
        assert response.headers["content-type"] == "application/json", response.headers
        payload = response.json()
        assert "error" not in payload and "result" in payload, text[:500]
        if row.reply_id is not ANY:
            assert payload["id"] == row.reply_id
    else:
        # No JSON-RPC answer fits (unknown tenant, 405, 413, bad Host): a readable text body.
        assert response.headers["content-type"].startswith("text/plain"), response.headers
        assert response.body.strip()
    if row.says is not None:
        assert row.says in message, message
    if row.check is not None:
        assert row.check(response) is not False


async def assert_server_still_serves() -> None:
    client = Client("demo")
    await client.initialize()
    response = await client.request("tools/call", {"name": "echo", "arguments": {"message": "still here"}})
    assert response.status == 200, response.body
    assert response.json()["result"]["structuredContent"] == {"echo": "still here"}


def test_the_table_has_at_least_45_rows_with_unique_ids() -> None:
    ids = [row.id for row in ROWS]
    assert len(ids) >= 45
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in ROWS])
async def test_hostile_request_gets_its_exact_answer_and_the_server_keeps_serving(
    row: Row, env: Env, settings
) -> None:
    for name, value in row.settings.items():
        setattr(settings, name, value)
    client = None
    if row.session is not None:
        client = Client("demo")
        await client.initialize(row.session)
        env.values[SESSION] = client.session_id or ""
    path = env.resolve(row.path)
    response = await call(row.method, path, encode_body(row, env), request_headers(row, client, env))
    assert_answer(row, response)
    await assert_server_still_serves()


@pytest.mark.django_db  # so that pytest-django sets up the test database for a run of this module alone
def test_the_module_tenants_are_seeded_once() -> None:
    assert {"demo", "foreign", "sleeping"} <= set(Tenant.objects.values_list("slug", flat=True))
