"""Who may call the API: the admin's session with its CSRF token, or a `manage` token for the API only.

A token minted for a tenant's MCP endpoint is refused here, and a `manage` token is refused by the
MCP endpoints (AMB-51).
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from mcp_app.api.authentication import api_uri
from mcp_app.api.tokens import issue_manage_token
from mcp_app.models import Tool
from mcp_app.oauth import scopes, tokens
from tenants.models import Tenant
from tests.api.conftest import API, ApiClient, tool_body
from tests.oauth.rs_support import ALL_SCOPES, AuthClient, issue_token, make_application
from tests.transport.conftest import clean_transport_state  # noqa: F401 - autouse fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_token_cache():
    tokens.reset()
    yield
    tokens.reset()


def test_an_anonymous_caller_gets_401_with_a_bearer_challenge_in_the_error_shape(tenant_a):
    response = ApiClient().call("GET", f"{API}/tenant-a/tools/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_session_write_without_the_csrf_token_is_refused(alice, tenant_a):
    client = ApiClient(alice)
    response = client.post(f"{API}/tenant-a/tools/", tool_body(), content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]
    assert not Tool.objects.exists()


def test_a_session_write_with_the_csrf_token_creates_the_tool(as_alice, tenant_a):
    assert as_alice.call("POST", f"{API}/tenant-a/tools/", tool_body()).status_code == 201
    assert Tool.objects.filter(tenant=tenant_a, name="greet").exists()


def test_a_manage_token_writes_without_csrf_as_its_user(alice, alice_token, tenant_a):
    client = ApiClient(token=alice_token)
    assert client.call("POST", f"{API}/tenant-a/tools/", tool_body()).status_code == 201
    assert [t["slug"] for t in client.call("GET", "/api/v1/tenants/").json()["results"]] == ["tenant-a"]


def test_a_manage_token_of_charlie_sees_nothing_of_tenant_a(charlie, tenant_a, echo_tool):
    client = ApiClient(token=issue_manage_token(charlie))
    assert client.call("GET", f"{API}/tenant-a/tools/").status_code == 404
    assert client.call("DELETE", f"{API}/tenant-a/tools/{echo_tool.pk}/").status_code == 404
    assert Tool.objects.filter(pk=echo_tool.pk).exists()


def test_a_token_minted_for_an_mcp_endpoint_is_refused_by_the_api(alice, tenant_a):
    mcp_token = issue_token(alice, tenant_a, make_application(), scope=f"{ALL_SCOPES} {scopes.MANAGE}")
    response = ApiClient(token=mcp_token).call("GET", f"{API}/tenant-a/tools/")
    assert response.status_code == 401
    assert "not issued for this API" in response.json()["error"]["message"]


def test_an_api_audience_token_without_the_manage_scope_is_refused(alice, tenant_a):
    token = issue_token(alice, None, make_application(), scope=ALL_SCOPES, resource=[api_uri()])
    assert ApiClient(token=token).call("GET", "/api/v1/tenants/").status_code == 401


def test_an_unknown_or_expired_token_is_refused(alice, tenant_a):
    expired = issue_token(alice, None, make_application(), scope="manage", resource=[api_uri()], expires_in=-5)
    assert ApiClient(token=expired).call("GET", "/api/v1/tenants/").status_code == 401
    assert ApiClient(token="made-up").call("GET", "/api/v1/tenants/").status_code == 401


async def test_a_manage_token_is_refused_by_the_mcp_endpoint(alice, tenant_a):
    await sync_to_async(Tenant.objects.filter(pk=tenant_a.pk).update)(auth_mode="oauth")
    token = await sync_to_async(issue_manage_token)(alice)
    response = await AuthClient(token=token).request("tools/list")
    assert response.status == 401
    assert tokens.WRONG_AUDIENCE.encode() in response.headers["www-authenticate"].encode()


def test_the_api_token_command_prints_a_working_token(alice, tenant_a, capsys):
    call_command("api_token", "alice", "--days", "1")
    token = capsys.readouterr().out.strip()
    assert ApiClient(token=token).call("GET", f"{API}/tenant-a/").status_code == 200
