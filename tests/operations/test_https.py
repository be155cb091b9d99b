"""Behind a TLS proxy (AMB-110, AMB-111): the proxy's header, pages redirected to https, other methods
refused in words, the probes and /metrics reachable over plain HTTP with any Host, MCP never redirected."""

from __future__ import annotations

import os
import subprocess

import pytest

from mcp_app.core.versions import V2025_11_25
from tests import zygote
from tests.transport.support import Client as McpClient

PUBLIC = "https://mcp.example.com"
POD_IP = "10.1.2.3:8000"


def settings_under(**env: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT)"
    )
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    run_env.update(DJANGO_SETTINGS_MODULE="mcpsite.settings", **env)
    return zygote.run_code(code, run_env)


def test_the_proxys_header_is_off_by_default_and_the_redirect_needs_https_and_the_header() -> None:
    def read(**env: str) -> str:
        proc = settings_under(**env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert read(MCP_PUBLIC_URL=PUBLIC) == "None False"
    assert read(MCP_PUBLIC_URL=PUBLIC, MCP_PROXY_SSL_HEADER="X-Forwarded-Proto") == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True"
    )
    assert read(MCP_PUBLIC_URL=PUBLIC, MCP_PROXY_SSL_HEADER="X-Forwarded-Ssl=on") == "('HTTP_X_FORWARDED_SSL', 'on') True"
    assert read(MCP_PUBLIC_URL="http://127.0.0.1:8000", MCP_PROXY_SSL_HEADER="X-Forwarded-Proto").endswith("False")
    assert read(MCP_PUBLIC_URL=PUBLIC, MCP_PROXY_SSL_HEADER="X-Forwarded-Proto", MCP_SSL_REDIRECT="0").endswith(
        "False"
    )
    assert read(MCP_PUBLIC_URL=PUBLIC, MCP_SSL_REDIRECT="1") == "None True"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MCP_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}, "MCP_PROXY_SSL_HEADER"),
        ({"MCP_PROXY_SSL_HEADER": "X_Forwarded_Proto"}, "MCP_PROXY_SSL_HEADER"),
        ({"MCP_PROXY_SSL_HEADER": "X-Forwarded-Ssl="}, "MCP_PROXY_SSL_HEADER"),
        ({"MCP_SSL_REDIRECT": "sometimes"}, "MCP_SSL_REDIRECT"),
        ({"MCP_SSL_REDIRECT": "1", "MCP_PUBLIC_URL": "http://127.0.0.1:8000"}, "MCP_SSL_REDIRECT"),
    ],
)
def test_junk_in_the_tls_settings_stops_the_process_naming_the_variable(env: dict[str, str], named: str) -> None:
    proc = settings_under(**{"MCP_PUBLIC_URL": PUBLIC, **env})
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and named in proc.stderr.splitlines()[-1]


@pytest.fixture
def behind_tls(settings):
    settings.MCP_PUBLIC_URL = PUBLIC
    settings.ALLOWED_HOSTS = ["mcp.example.com", "127.0.0.1"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    return settings


HTTPS = {"HTTP_HOST": "mcp.example.com", "HTTP_X_FORWARDED_PROTO": "https"}
PLAIN = {"HTTP_HOST": "mcp.example.com", "HTTP_X_FORWARDED_PROTO": "http"}


@pytest.mark.django_db
def test_a_page_asked_for_over_plain_http_is_redirected_to_https(client, behind_tls) -> None:
    response = client.get("/admin/login/?next=/admin/", **PLAIN)
    assert response.status_code == 301
    assert response["Location"] == "https://mcp.example.com/admin/login/?next=/admin/"
    assert client.get("/admin/login/", **HTTPS).status_code == 200


@pytest.mark.django_db
def test_a_post_over_plain_http_is_refused_in_words_not_redirected(client, behind_tls) -> None:
    response = client.post("/oauth/token", {"grant_type": "authorization_code"}, **PLAIN)
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == "invalid_request"
    assert "https://mcp.example.com/oauth/token" in body["error_description"]
    # Over https the endpoint itself answers (here: an incomplete token request).
    assert client.post("/oauth/token", {"grant_type": "authorization_code"}, **HTTPS).status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/health/live", "/health/ready", "/metrics"])
def test_probes_and_metrics_answer_over_plain_http_whatever_their_host(client, behind_tls, path) -> None:
    for headers in (PLAIN, {"HTTP_HOST": POD_IP}):
        response = client.get(path, HTTP_ACCEPT="application/json", **headers)
        assert response.status_code == 200, (headers, response.status_code, response.content[:200])


@pytest.mark.django_db
def test_every_other_path_still_refuses_a_host_that_is_not_allowed(client, behind_tls) -> None:
    assert client.get("/admin/login/", HTTP_HOST=POD_IP, HTTP_X_FORWARDED_PROTO="https").status_code == 400
    assert client.get("/health/live/extra", HTTP_HOST=POD_IP, HTTP_X_FORWARDED_PROTO="https").status_code == 400


@pytest.mark.django_db(transaction=True)
async def test_the_mcp_endpoint_answers_a_plain_http_post_instead_of_redirecting_it(behind_tls, tenant_a) -> None:
    response = await McpClient().initialize(V2025_11_25)
    assert response.json()["result"]["protocolVersion"] == V2025_11_25


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_a_post_over_plain_http_is_refused_in_words_too(async_client, behind_tls) -> None:
    response = await async_client.post("/oauth/register", {}, content_type="application/json", **PLAIN)
    assert response.status_code == 403
    assert "https://mcp.example.com/oauth/register" in response.json()["error_description"]
