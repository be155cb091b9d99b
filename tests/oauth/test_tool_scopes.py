"""One rule for a tool's own scope: only enabled tools count, when offered, granted and checked alike."""

from __future__ import annotations

import pytest

from mcp_app import catalog
from mcp_app.models import Tool
from mcp_app.oauth import metadata, validators
from tenants.models import Tenant


@pytest.fixture
def vault(db) -> Tenant:
    tenant = Tenant.objects.create(slug="vault", name="vault", auth_mode="oauth")
    Tool.objects.create(tenant=tenant, name="open_safe", handler="template", required_scope="vault:open")
    Tool.objects.create(
        tenant=tenant, name="old_safe", handler="template", required_scope="vault:old", enabled=False
    )
    return tenant


def test_a_disabled_tools_scope_is_not_advertised_in_the_protected_resource_metadata(vault):
    assert metadata.supported_scopes(vault)[-1:] == ["vault:open"]
    assert "vault:old" not in metadata.supported_scopes(vault)


def test_a_disabled_tools_scope_cannot_be_granted(vault):
    assert "vault:open" in validators.grantable_scopes(vault)
    assert "vault:old" not in validators.grantable_scopes(vault)


@pytest.mark.django_db(transaction=True)
async def test_a_disabled_tools_scope_is_not_checked_by_the_endpoint(vault):
    catalog.clear_caches()
    info = await catalog.get_tenant("vault")
    assert info.tool_scopes == (("open_safe", "vault:open"),)


def test_enabling_the_tool_makes_its_scope_count_everywhere(vault):
    Tool.objects.filter(name="old_safe").update(enabled=True)
    assert "vault:old" in metadata.supported_scopes(vault)
    assert "vault:old" in validators.grantable_scopes(vault)
