"""An upstream that cannot be reached fails with a clear UpstreamUnavailable that never holds a secret."""

from __future__ import annotations

import logging

import pytest

from mcp_app.federation import Target, UpstreamUnavailable, call_tool, discover
from tests.e2e.servers import free_port
from tests.federation.support import target_for
from tests.upstreams.servers import UpstreamServer

SECRET = "s3cr3t-upstream-token-value"
MODES = ("auto", "legacy")


@pytest.fixture(scope="module")
def bearer_server(tmp_path_factory):
    server = UpstreamServer(free_port(), tmp_path_factory.mktemp("bearer") / "upstream.log", bearer=SECRET)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory):
    server = UpstreamServer(free_port(), tmp_path_factory.mktemp("broken") / "upstream.log", status=503)
    server.start()
    yield server
    server.stop()


def secret_free(message: str, caplog: pytest.LogCaptureFixture) -> None:
    assert SECRET not in message
    assert SECRET not in caplog.text
    assert all(SECRET not in str(record.args) for record in caplog.records)


@pytest.mark.parametrize("mode", MODES)
async def test_a_refused_connection_is_unavailable(mode, caplog):
    caplog.set_level(logging.DEBUG)
    port = free_port()
    target = Target(1, 1, f"http://127.0.0.1:{port}/mcp", headers=(("X-Api-Key", SECRET),), mode=mode)

    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target, "echo", {"message": "x"})

    assert caught.value.message == f"Could not connect to upstream 127.0.0.1:{port}."
    secret_free(caught.value.message, caplog)


@pytest.mark.parametrize("mode", MODES)
async def test_a_name_that_does_not_resolve_is_unavailable(mode, settings):
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1", "no-such-host.invalid"]
    target = Target(1, 1, "http://no-such-host.invalid/mcp", mode=mode)

    with pytest.raises(UpstreamUnavailable) as caught:
        await discover(target)

    assert caught.value.message == (
        "Upstream no-such-host.invalid cannot be used: The host 'no-such-host.invalid' could not be resolved."
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_failed_tls_handshake_is_unavailable(mode, modern_upstream):
    target = Target(1, 1, f"https://127.0.0.1:{modern_upstream.port}/mcp", mode=mode)

    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target, "echo", {"message": "x"})

    assert caught.value.message == f"The TLS handshake with upstream 127.0.0.1:{modern_upstream.port} failed."


@pytest.mark.parametrize("mode", MODES)
async def test_refused_credentials_are_unavailable_and_never_quoted(mode, bearer_server, caplog):
    caplog.set_level(logging.DEBUG)
    server = bearer_server
    target = target_for(server, headers=(("Authorization", "Bearer wrong-token-value"),), mode=mode)

    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target, "echo", {"message": "x"})

    assert caught.value.message == f"Upstream 127.0.0.1:{server.port} refused our credentials (HTTP 401)."
    assert "wrong-token-value" not in caught.value.message
    assert "wrong-token-value" not in caplog.text
    assert "wrong-token-value" not in repr(target)
    assert server.stats()["unauthorized"] >= 1


@pytest.mark.parametrize("mode", MODES)
async def test_the_secret_header_reaches_the_upstream(mode, bearer_server, caplog):
    caplog.set_level(logging.DEBUG)
    server = bearer_server
    before = server.stats()["unauthorized"]
    target = target_for(server, headers=(("Authorization", f"Bearer {SECRET}"),), mode=mode)

    result = await call_tool(target, "echo", {"message": "authorized"})

    assert result["structuredContent"] == {"echo": "authorized"}
    assert server.stats()["unauthorized"] == before
    secret_free("", caplog)


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_upstream_is_unavailable(mode, broken_server):
    with pytest.raises(UpstreamUnavailable) as caught:
        await call_tool(target_for(broken_server, mode=mode), "echo", {"message": "x"})

    assert caught.value.message == f"Upstream 127.0.0.1:{broken_server.port} failed (HTTP 503)."


@pytest.mark.parametrize("mode", MODES)
async def test_a_loopback_upstream_is_refused_by_the_ssrf_guard(mode, modern_upstream, settings):
    settings.MCP_HTTP_HANDLER_ALLOW = []
    before = modern_upstream.stats()["methods"]

    with pytest.raises(UpstreamUnavailable) as caught:
        await discover(target_for(modern_upstream, mode=mode))

    assert caught.value.message == (
        f"Upstream 127.0.0.1:{modern_upstream.port} cannot be used: "
        "The host '127.0.0.1' resolves to a loopback address; refused."
    )
    assert modern_upstream.stats()["methods"] == before


async def test_plain_http_to_a_public_host_is_refused(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = []

    with pytest.raises(UpstreamUnavailable) as caught:
        await discover(Target(1, 1, "http://93.184.215.14/mcp"))

    assert caught.value.message == "Upstream 93.184.215.14 cannot be used: Its URL must use https."
