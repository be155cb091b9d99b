"""The http kind against a real HTTP server on 127.0.0.1 (admitted through MCP_HTTP_HANDLER_ALLOW)."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import threading

import pytest
import trustme
from django.core.exceptions import ValidationError

from mcp_app.handlers import registry
from mcp_app.handlers.secrets import encrypt_secrets
from tests.handlers.support import PNG, QuietServer, Upstream, handler_class, make_tool
from tests.support import make_ctx


def http_tool(url: str, **config):
    secrets = config.pop("secrets", None)
    timeout_seconds = config.pop("timeout_seconds", 30)
    return make_tool(
        "http",
        {"url": url, **config},
        handler_secrets=encrypt_secrets(secrets) if secrets else "",
        timeout_seconds=timeout_seconds,
    )


async def test_json_object_reply_becomes_structured_content_and_its_text(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/echo"), {"q": "x", "n": 2})
    expected = {"received": {"q": "x", "n": 2}, "path": "/echo"}
    assert result == {
        "content": [{"type": "text", "text": json.dumps(expected)}],
        "structuredContent": expected,
    }
    [request] = upstream.requests
    assert request["method"] == "POST" and request["headers"]["Content-Type"] == "application/json"


async def test_get_sends_arguments_as_query_parameters(ctx, upstream, allow_local):
    result = await registry.run_inline(
        ctx, http_tool(f"{upstream.base}/echo", method="GET"), {"q": "a b", "n": 2}
    )
    assert result["structuredContent"]["path"] == "/echo?q=a+b&n=2"
    assert upstream.requests[0]["method"] == "GET"


async def test_reply_with_a_content_list_is_used_as_the_tool_result(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/content"), {})
    assert result == {
        "content": [{"type": "text", "text": "from upstream"}],
        "structuredContent": {"ok": True},
    }


async def test_text_reply_becomes_a_text_block(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/text"), {})
    assert result == {"content": [{"type": "text", "text": "plain ünïcode"}]}


async def test_json_array_reply_is_text_without_structured_content(ctx, upstream, allow_local):
    assert await registry.run_inline(ctx, http_tool(f"{upstream.base}/list"), {}) == {
        "content": [{"type": "text", "text": "[1, 2, 3]"}]
    }


async def test_json_reply_nested_past_the_limit_is_an_error_result_naming_it(ctx, upstream, allow_local):
    # AMB-115: it was a RecursionError, an "internal error" the tenant could not act on.
    assert await registry.run_inline(ctx, http_tool(f"{upstream.base}/deep"), {}) == {
        "content": [{"type": "text", "text": "The upstream's JSON reply is nested deeper than 64 levels."}],
        "isError": True,
    }


async def test_image_reply_becomes_an_image_block(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/image"), {})
    assert result == {
        "content": [{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}]
    }


@pytest.mark.parametrize(("path", "status"), [("/fail", 500), ("/unavailable", 503)])
async def test_non_2xx_reply_is_an_error_result_naming_the_status_and_not_the_body(
    ctx, upstream, allow_local, path, status
):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}{path}"), {})
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"Upstream returned HTTP {status}")
    assert "hunter2" not in str(result)


async def test_slow_upstream_times_out_with_a_clear_error(ctx, upstream, allow_local):
    tool = http_tool(f"{upstream.base}/slow", timeout=0.3)
    result = await asyncio.wait_for(registry.run_inline(ctx, tool, {}), timeout=5)
    assert result == {
        "content": [{"type": "text", "text": "The upstream service did not answer within 0.3 seconds."}],
        "isError": True,
    }


async def test_tool_timeout_caps_the_configured_http_timeout(ctx, upstream, allow_local):
    tool = http_tool(f"{upstream.base}/slow", timeout=60, timeout_seconds=1)
    result = await asyncio.wait_for(registry.run_inline(ctx, tool, {}), timeout=5)
    assert result["isError"] is True and "within 1 seconds" in result["content"][0]["text"]


async def test_oversize_reply_is_abandoned_with_an_error(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/big"), {})
    assert result == {
        "content": [{"type": "text", "text": "The upstream reply is larger than 16384 bytes."}],
        "isError": True,
    }


async def test_redirect_to_a_private_address_is_not_followed(ctx, upstream_factory, allow_local):
    upstream, internal = upstream_factory(), upstream_factory()
    upstream.redirect_to = f"{internal.base}/echo"
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/redirect"), {})
    assert result["isError"] is True and "HTTP 302" in result["content"][0]["text"]
    assert internal.requests == []


async def test_unreachable_upstream_is_an_error_result(ctx, allow_local):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        result = await registry.run_inline(ctx, http_tool(f"http://127.0.0.1:{port}/echo"), {})
    assert result == {
        "content": [{"type": "text", "text": "Could not connect to the upstream service at 127.0.0.1."}],
        "isError": True,
    }


async def test_secret_headers_are_sent_but_never_appear_in_results(ctx, upstream, allow_local):
    tool = http_tool(
        f"{upstream.base}/fail", headers={"X-Team": "a"}, secrets={"Authorization": "Bearer s3cr3t-upstream"}
    )
    result = await registry.run_inline(ctx, tool, {})
    headers = upstream.requests[0]["headers"]
    assert headers["Authorization"] == "Bearer s3cr3t-upstream" and headers["X-Team"] == "a"
    assert "s3cr3t" not in json.dumps(result)
    assert "s3cr3t" not in tool.handler_secrets


async def test_au45_client_token_is_never_forwarded_upstream(tenant_a, upstream, allow_local):
    ctx = make_ctx(tenant_a, user_id=7, client_id="client-1", scopes=frozenset({"mcp"}))
    await registry.run_inline(ctx, http_tool(f"{upstream.base}/echo"), {})
    headers = {k.lower() for k in upstream.requests[0]["headers"]}
    assert "authorization" not in headers and "cookie" not in headers


async def test_http_tool_refuses_loopback_without_the_allow_list(ctx, upstream, settings):
    settings.MCP_HTTP_HANDLER_ALLOW = []
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/echo"), {})
    assert result == {
        "content": [
            {"type": "text", "text": "The host '127.0.0.1' resolves to a loopback address; refused."}
        ],
        "isError": True,
    }
    assert upstream.requests == []


async def test_connection_goes_to_the_vetted_address_with_the_configured_host_name(
    ctx, upstream, allow_local, monkeypatch
):
    # The name only resolves through our patched lookup: if httpx resolved it again, the call would fail.
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def fake_getaddrinfo(host, port, **kwargs):
        if host == "tenant-api.invalid":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return await real(host, port, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    result = await registry.run_inline(
        ctx, http_tool(f"http://tenant-api.invalid:{upstream.port}/echo"), {"a": 1}
    )
    assert result["structuredContent"]["received"] == {"a": 1}
    assert upstream.requests[0]["headers"]["Host"] == f"tenant-api.invalid:{upstream.port}"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "'url' is required"),
        ({"url": "ftp://example.com/"}, "must use http or https"),
        ({"url": "https://user:pw@example.com/"}, "must not contain credentials"),
        ({"url": "https://example.com/", "method": "TRACE"}, "'method' must be one of"),
        ({"url": "https://example.com/", "headers": {"Authorization": "Bearer x"}}, "secret headers"),
        ({"url": "https://example.com/", "headers": {"Host": "evil"}}, "set by the platform"),
        ({"url": "https://example.com/", "headers": {"X-A": "a\r\nX-B: b"}}, "line break"),
        ({"url": "https://example.com/", "timeout": 0}, "'timeout' must be"),
        ({"url": "https://example.com/", "retries": 3}, "Unknown http handler keys: retries"),
    ],
)
def test_validate_config_explains_what_is_wrong(config, message):
    with pytest.raises(ValidationError, match=message):
        registry.validate_config("http", config)


def test_validate_config_accepts_a_full_configuration():
    registry.validate_config(
        "http",
        {"url": "https://api.example.com/run", "method": "get", "headers": {"X-Team": "a"}, "timeout": 5},
    )


async def test_https_call_pins_the_address_and_still_verifies_the_certificate_for_the_name(
    ctx, upstream_factory, allow_local, monkeypatch
):
    ca = trustme.CA()
    upstream = Upstream(base="", port=0)
    server = QuietServer(("127.0.0.1", 0), handler_class(upstream))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("tenant-api.test").configure_cert(server_ctx)
    server.socket = server_ctx.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        client_ctx = ssl.create_default_context()
        ca.configure_trust(client_ctx)
        monkeypatch.setattr("mcp_app.handlers.http._ssl_context", lambda: client_ctx)
        loop = asyncio.get_running_loop()

        async def fake_getaddrinfo(host, port, **kwargs):
            assert host in ("tenant-api.test", "other-name.test")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

        monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
        ok = await registry.run_inline(ctx, http_tool(f"https://tenant-api.test:{port}/echo"), {"a": 1})
        assert ok["structuredContent"]["received"] == {"a": 1}
        # Same address, a name the certificate does not cover: verification must still fail.
        wrong = await registry.run_inline(ctx, http_tool(f"https://other-name.test:{port}/echo"), {"a": 1})
        assert wrong["isError"] is True
        assert len(upstream.requests) == 1
    finally:
        server.shutdown()
        server.server_close()


async def test_a_tool_acting_as_the_caller_refuses_an_anonymous_one_before_sending_anything(
    tenant_a, upstream, allow_local
):
    ctx = make_ctx(tenant_a, user_id=None)
    result = await registry.run_inline(ctx, http_tool(f"{upstream.base}/echo", connection="gh"), {})
    assert result["isError"] and "needs a signed-in caller" in result["content"][0]["text"]
    assert upstream.requests == []


def test_a_connection_must_name_a_provider():
    with pytest.raises(ValidationError, match="'connection' must name one of the tenant's providers"):
        registry.validate_config("http", {"url": "https://api.example.com/x", "connection": "Not A Name"})
    registry.validate_config("http", {"url": "https://api.example.com/x", "connection": "gh"})
