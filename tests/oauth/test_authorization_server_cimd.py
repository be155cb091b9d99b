"""Client ID metadata documents served over HTTPS on 127.0.0.1 with a throwaway CA (trustme)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme
from django.core.cache import cache
from oauth2_provider.models import AccessToken, Application

from mcp_app.oauth import resources
from tests.oauth.as_support import (
    LOOPBACK_REDIRECT,
    authorize_params,
    authorize_url,
    canonical,
    consent,
    exchange,
    pkce_pair,
    redirect_params,
)


class DocumentServer:
    """An HTTPS server answering fixed documents by path, and counting what it was asked."""

    def __init__(self, ca: trustme.CA) -> None:
        self.documents: dict[str, tuple[int, str, bytes]] = {}
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer.hits.append(self.path)
                status, content_type, body = outer.documents.get(self.path, (404, "text/plain", b"missing"))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def publish(self, path: str, document: dict[str, Any], status: int = 200) -> str:
        self.documents[path] = (status, "application/json", json.dumps(document).encode())
        return self.url(path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def docs(tmp_path, settings) -> Iterator[DocumentServer]:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    settings.MCP_CIMD_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.MCP_CIMD_CA_BUNDLE = str(bundle)
    cache.clear()  # DOT's per-URL failure backoff lives in the cache
    server = DocumentServer(ca)
    yield server
    server.close()
    cache.clear()


def document(client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_name": "Metadata Client",
        "redirect_uris": [LOOPBACK_REDIRECT],
        "token_endpoint_auth_method": "none",
        "logo_uri": "https://client.example/logo.png",
        "client_uri": "https://client.example",
        **extra,
    }


def test_au25_cimd_client_is_fetched_once_shown_on_consent_and_gets_a_bound_token(client, docs, member):
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id))
    verifier, challenge = pkce_pair()
    client.force_login(member)
    params = authorize_params(client_id, challenge, resource=canonical("vault"))
    page = client.get(authorize_url(params))
    assert page.status_code == 200, page.content[:1000]
    html = page.content.decode()
    assert "Metadata Client" in html and "https://client.example/logo.png" in html
    assert "metadata document at 127.0.0.1" in html
    application = Application.objects.get(client_id=client_id)
    assert (application.registration_source, application.client_type) == ("cimd", "public")
    back = redirect_params(consent(client, params))
    assert back["iss"] == resources.issuer()
    token = exchange(client, client_id, back["code"], verifier, resource=canonical("vault"))
    assert token.status_code == 200, token.content
    assert AccessToken.objects.get().resource == [canonical("vault")]
    assert docs.hits == ["/oauth/client.json"]  # cached: the later requests did not fetch again


def test_au25_cimd_document_whose_client_id_differs_from_its_url_is_refused(client, docs, member):
    client_id = docs.url("/oauth/liar.json")
    docs.publish("/oauth/liar.json", document(docs.url("/oauth/someone-else.json")))
    _, challenge = pkce_pair()
    client.force_login(member)
    response = client.get(authorize_url(authorize_params(client_id, challenge, resource=canonical("vault"))))
    assert response.status_code in (400, 401) and "Location" not in response
    assert not Application.objects.filter(client_id=client_id).exists()


def test_au25_cimd_document_on_a_private_address_is_not_fetched_without_the_allow_list(
    client, docs, member, settings
):
    settings.MCP_CIMD_ALLOWED_HOSTS = []
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id))
    _, challenge = pkce_pair()
    client.force_login(member)
    response = client.get(authorize_url(authorize_params(client_id, challenge, resource=canonical("vault"))))
    assert response.status_code in (400, 401) and "Location" not in response
    assert docs.hits == []  # refused before any connection was made
    assert not Application.objects.filter(client_id=client_id).exists()


def test_au25_cimd_host_on_the_deny_list_is_never_fetched(client, docs, member, settings):
    settings.MCP_CIMD_DENIED_HOSTS = ["127.0.0.1"]
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id))
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(client_id, challenge)))
    assert response.status_code in (400, 401) and docs.hits == []


def test_au25_cimd_document_without_our_ca_bundle_fails_certificate_verification(
    client, docs, member, settings
):
    settings.MCP_CIMD_CA_BUNDLE = None
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id))
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(client_id, challenge)))
    assert response.status_code in (400, 401)
    assert not Application.objects.filter(client_id=client_id).exists()


def test_au32_redirect_uri_not_in_the_cimd_document_is_refused_without_redirect(client, docs, member):
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id))
    _, challenge = pkce_pair()
    client.force_login(member)
    params = authorize_params(
        client_id, challenge, resource=canonical("vault"), redirect_uri="https://evil.example/cb"
    )
    response = client.get(authorize_url(params))
    assert response.status_code == 400 and "Location" not in response


@pytest.mark.parametrize(
    "bad_uri", ["javascript:alert(1)", "http://evil.example/cb", "https://app.example/cb#x"]
)
def test_au32_cimd_document_with_a_forbidden_redirect_uri_is_refused(client, docs, member, bad_uri):
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id, redirect_uris=[bad_uri]))
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(client_id, challenge, redirect_uri=bad_uri)))
    assert response.status_code in (400, 401) and "Location" not in response
    assert not Application.objects.filter(client_id=client_id).exists()


def test_au25_cimd_document_claiming_a_client_secret_is_refused(client, docs, member):
    client_id = docs.url("/oauth/client.json")
    docs.publish("/oauth/client.json", document(client_id, token_endpoint_auth_method="client_secret_basic"))
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(client_id, challenge)))
    assert response.status_code in (400, 401)
    assert not Application.objects.filter(client_id=client_id).exists()


def test_au25_cimd_document_nested_past_the_limit_is_refused(client, docs, member):
    # AMB-115: the one nesting limit holds for client documents too (DOT caps their size only).
    levels = 65
    client_id = docs.url("/oauth/deep.json")
    body = json.dumps(document(client_id))[:-1] + ', "x": ' + "[" * levels + "]" * levels + "}"
    docs.documents["/oauth/deep.json"] = (200, "application/json", body.encode())
    _, challenge = pkce_pair()
    client.force_login(member)
    response = client.get(authorize_url(authorize_params(client_id, challenge, resource=canonical("vault"))))
    assert response.status_code in (400, 401) and "Location" not in response
    assert not Application.objects.filter(client_id=client_id).exists()
