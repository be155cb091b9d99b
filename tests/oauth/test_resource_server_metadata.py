"""RFC 9728 protected resource metadata per oauth tenant (checklist AU-10, AU-11, AU-12, AU-14, AMB-27)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from mcp_app.core.types import TenantInfo
from mcp_app.models import Tool
from mcp_app.oauth import resources
from mcp_app.oauth.resource_server import bearer_challenge
from tenants.models import Tenant

PRM = "/.well-known/oauth-protected-resource/t/{slug}/mcp"


@pytest.fixture
def vault(db) -> Tenant:
    tenant = Tenant.objects.create(slug="vault", name="vault", title="The Vault", auth_mode="oauth")
    for name, scope, enabled in (
        ("payroll", "payroll:read", True),
        ("payroll2", "payroll:read", True),
        ("audit", "audit:write", True),
        ("retired", "retired:scope", False),
        ("plain", "", True),
    ):
        Tool.objects.create(
            tenant=tenant, name=name, handler="template", required_scope=scope, enabled=enabled
        )
    return tenant


def test_au10_au11_au12_the_metadata_names_the_tenant_endpoint_and_the_authorization_server(client, vault):
    response = client.get(PRM.format(slug="vault"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        # AU-12: identical to the URL the metadata location was derived from.
        "resource": "http://127.0.0.1:8000/t/vault/mcp",
        "authorization_servers": ["http://127.0.0.1:8000"],
        # The base scopes, then each enabled tool's own scope once (disabled tools' scopes are not offered).
        "scopes_supported": ["mcp:tools", "mcp:prompts", "mcp:resources", "audit:write", "payroll:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "The Vault",
    }


def test_au14_the_metadata_is_public_and_readable_from_browsers(client, vault):
    response = client.get(PRM.format(slug="vault"), HTTP_ORIGIN="https://app.example")
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
    preflight = client.options(
        PRM.format(slug="vault"),
        HTTP_ORIGIN="https://app.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="mcp-protocol-version",
    )
    assert preflight.status_code == 200
    assert preflight["Access-Control-Allow-Origin"] == "*"
    assert "MCP-Protocol-Version" in preflight["Access-Control-Allow-Headers"]


def test_au12_the_metadata_follows_mcp_public_url(client, vault, settings):
    settings.MCP_PUBLIC_URL = "https://MCP.Example.com"
    data = client.get(PRM.format(slug="vault"), HTTP_HOST="127.0.0.1").json()
    assert data["resource"] == "https://mcp.example.com/t/vault/mcp"
    assert data["authorization_servers"] == ["https://mcp.example.com"]


def test_the_metadata_uses_the_tenant_name_without_a_title(client, vault):
    Tenant.objects.filter(pk=vault.pk).update(title="")
    assert client.get(PRM.format(slug="vault")).json()["resource_name"] == "vault"


@pytest.mark.parametrize("slug", ["nobody", "sleeping", "open", "VAULT"])
def test_amb30_unknown_inactive_and_public_tenants_have_no_metadata(client, vault, slug):
    Tenant.objects.create(slug="sleeping", name="s", is_active=False, auth_mode="oauth")
    Tenant.objects.create(slug="open", name="o", auth_mode="public")
    response = client.get(PRM.format(slug=slug))
    assert response.status_code == 404
    assert b"vault" not in response.content


def test_the_metadata_refuses_writes(client, vault):
    assert client.post(PRM.format(slug="vault")).status_code == 405


def test_au13_the_401_challenge_points_at_this_document(client, vault):
    info = TenantInfo(id=vault.pk, slug="vault", name="vault")
    header = bearer_challenge(info)[1].decode()
    url = re.search(r'resource_metadata="([^"]+)"', header).group(1)
    document = client.get(urlsplit(url).path).json()
    assert document["resource"] == resources.canonical_uri("vault")
