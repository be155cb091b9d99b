"""Human mistakes on a tenant's URLs get real pages (AMB-230..232), and MCP clients keep their answers.

Through the whole ASGI application (Channels' router, then Django), as Daphne serves it.
"""

from __future__ import annotations

import json

import pytest

from tests.transport.support import BOTH, call

pytestmark = pytest.mark.django_db(transaction=True)

# What Chromium sends when a person types a URL: HTML first, and */* (which admits an event stream).
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


async def test_a_browser_on_the_mcp_url_is_sent_to_the_connect_page(tenant_a):
    response = await call("GET", "/t/tenant-a/mcp", headers={"accept": BROWSER})
    assert response.status == 302
    assert response.headers["location"] == "/t/tenant-a/connect"


async def test_an_mcp_clients_get_is_answered_as_before(tenant_a):
    # The SDK's GET names text/event-stream: no session → the 400 of a missing session, never a redirect.
    for accept in ("text/event-stream", f"text/html, {BOTH}"):
        response = await call("GET", "/t/tenant-a/mcp", headers={"accept": accept})
        assert response.status == 400, accept
        assert "Mcp-Session-Id" in response.json()["error"]["message"]
    # A POST asking for HTML is a client's mistake, answered as one (406), not a page.
    response = await call("POST", "/t/tenant-a/mcp", b"{}", headers={"accept": "text/html"})
    assert response.status == 406


async def test_an_unknown_tenant_is_a_readable_page_for_a_person_and_plain_text_for_a_client(db):
    page = await call("GET", "/t/nobody-here/mcp", headers={"accept": BROWSER})
    assert page.status == 404
    assert page.headers["content-type"].startswith("text/html")
    text = page.body.decode()
    assert "Nothing here" in text and "/t/&lt;tenant&gt;/connect" in text
    client = await call("GET", "/t/nobody-here/mcp", headers={"accept": "text/event-stream"})
    assert client.status == 404 and client.headers["content-type"].startswith("text/plain")


async def test_a_tenant_path_without_a_page_goes_to_the_connect_page(tenant_a):
    for path in ("/t/tenant-a", "/t/tenant-a/"):
        response = await call("GET", path, headers={"accept": BROWSER})
        assert response.status == 302, path
        assert response.headers["location"] == "/t/tenant-a/connect"


async def test_a_slug_in_the_wrong_case_redirects_a_browser_to_the_lower_case_path(tenant_a):
    for path, target in (
        ("/t/Tenant-A/mcp", "/t/tenant-a/mcp"),
        ("/t/TENANT-A", "/t/tenant-a"),
        ("/t/Tenant-a/connect?x=1", "/t/tenant-a/connect?x=1"),
    ):
        response = await call("GET", path, headers={"accept": BROWSER})
        assert response.status == 302, path
        assert response.headers["location"] == target


async def test_an_mcp_post_with_the_slug_in_the_wrong_case_is_told_the_right_url(tenant_a):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    response = await call(
        "POST", "/t/Tenant-A/mcp", body, headers={"accept": BOTH, "content-type": "application/json"}
    )
    assert response.status == 404
    error = response.json()["error"]
    assert error["data"]["url"].endswith("/t/tenant-a/mcp")
    assert "lower-case" in error["message"]


async def test_a_slug_that_cannot_be_one_even_lower_cased_is_the_404_page(db):
    response = await call("GET", "/t/Bad_Slug!/mcp", headers={"accept": BROWSER})
    assert response.status == 404
    assert "Nothing here" in response.body.decode()


async def test_any_missing_page_is_the_sites_readable_404(db):
    response = await call("GET", "/no/such/page", headers={"accept": BROWSER})
    assert response.status == 404
    assert "Nothing here" in response.body.decode()


async def test_the_api_root_lists_its_resources_and_links_the_docs(db):
    response = await call("GET", "/api/v1/", headers={"accept": "application/json"})
    assert response.status == 200
    body = response.json()
    assert body["docs"].endswith("/api/v1/docs/")
    assert body["schema"].endswith("/api/v1/schema/")
    assert body["tenants"].endswith("/api/v1/tenants/")
    assert body["tenant_resources"]["tools"].endswith("/api/v1/tenants/{slug}/tools/")
    assert body["tenant_resources"]["export"].endswith("/api/v1/tenants/{slug}/export")
    # Every resource the router serves is listed.
    for name in ("prompts", "resources", "resource-templates", "runs", "members", "upstreams"):
        assert name in body["tenant_resources"], name
