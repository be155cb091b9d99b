"""Connected accounts' providers in the tenant document (AMB-207): exported without their client secret
(named only), imported idempotently with the missing secret named, and never a person's connection."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Connection, Provider
from mcp_app.portability.document import DocumentError, dumps, export_tenant, loads
from mcp_app.portability.importer import import_document
from tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "provider-client-secret-5f1e"
TOKEN = "a-person's-access-token-77aa"


@pytest.fixture
def with_provider(tenant_a) -> Tenant:
    provider = Provider(
        tenant=tenant_a, name="github", display_name="GitHub", discovery_url="https://github.example.com",
        client_id="Iv1.abc", client_secret=encrypt_secrets({"client_secret": SECRET}), scopes="repo",
    )  # fmt: skip
    provider.full_clean()
    provider.save()
    person = get_user_model().objects.create_user("connected-person")
    Connection.objects.create(
        tenant=tenant_a, provider=provider, user=person, tokens=encrypt_secrets({"access_token": TOKEN})
    )
    return Tenant.objects.get(pk=tenant_a.pk)  # choices as stored values, as the document writes them


def test_a_provider_is_exported_with_its_secret_by_name_and_no_connection(with_provider) -> None:
    text = dumps(export_tenant(with_provider), "yaml")
    assert SECRET not in text and TOKEN not in text and "connected-person" not in text
    assert loads(text)["providers"] == [
        {
            "name": "github", "display_name": "GitHub", "discovery_url": "https://github.example.com",
            "client_id": "Iv1.abc", "scopes": "repo", "secrets": ["client_secret"],
        }
    ]  # fmt: skip


def test_importing_names_the_missing_client_secret_and_a_second_import_changes_nothing(with_provider) -> None:
    document = loads(dumps(export_tenant(with_provider), "json"))
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="oauth")
    plan = import_document(copy, document)
    assert plan.missing_provider_secrets == ["github"]
    assert plan.as_dict()["missing_provider_secrets"] == [{"provider": "github", "secret": "client_secret"}]
    assert any(line.startswith("! provider github needs its client secret") for line in plan.lines())
    made = Provider.objects.get(tenant=copy)
    assert (made.display_name, made.client_id, made.client_secret) == ("GitHub", "Iv1.abc", "")
    again = import_document(copy, document)
    assert again.counts()["unchanged"] == 1 and not again.has_changes
    # Into the tenant that holds the secret: nothing is missing.
    assert import_document(with_provider, document).missing_provider_secrets == []


def test_a_provider_without_discovery_or_endpoints_or_a_secret_value_is_refused(tenant_a) -> None:
    base = {"format": "mcp-platform/tenant", "version": 1}
    with pytest.raises(DocumentError) as refused:
        import_document(tenant_a, {**base, "providers": [{"name": "x", "client_id": "c"}]})
    assert "discovery URL, or both its authorization and token endpoints" in str(refused.value.problems)
    with pytest.raises(DocumentError) as smuggled:
        import_document(tenant_a, {**base, "providers": [{"name": "x", "client_id": "c", "client_secret": "v"}]})
    assert "Unknown key" in str(smuggled.value.problems)
    assert not Provider.objects.filter(tenant=tenant_a).exists()
