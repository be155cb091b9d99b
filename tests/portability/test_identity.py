"""A tenant's own identity provider in the tenant document (AMB-203): `settings.identity` travels, the
introspection client's secret never does, and the import names it missing."""

from __future__ import annotations

import pytest

from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.portability.document import DocumentError, dumps, export_tenant, loads
from mcp_app.portability.importer import import_document
from tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = {
    "issuer": "https://idp.example.com",
    "introspection_url": "https://idp.example.com/introspect",
    "client_id": "mcp-rs",
    "audience": "api://mcp",
    "scope_claim": "scp",
    "keep_platform_tokens": True,
}


def test_the_identity_travels_without_its_secret_and_the_import_names_the_secret_missing(tenant_a) -> None:
    Tenant.objects.filter(pk=tenant_a.pk).update(
        auth_mode="oauth",
        identity=IDENTITY,
        identity_client_secret=encrypt_secrets({"client_secret": "s3cret-of-the-rs"}),
    )
    text = dumps(export_tenant(Tenant.objects.get(pk=tenant_a.pk)), "yaml")
    assert "s3cret-of-the-rs" not in text and "identity_client_secret" not in text
    document = loads(text)
    assert document["settings"]["identity"] == IDENTITY
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    plan = import_document(copy, document)
    assert plan.missing_identity_secret is True
    assert "! settings.identity needs its introspection client's secret" in "\n".join(plan.lines())
    assert Tenant.objects.get(pk=copy.pk).identity == IDENTITY
    # Back into the tenant that holds the secret: nothing is missing.
    assert import_document(Tenant.objects.get(pk=tenant_a.pk), document).missing_identity_secret is False


@pytest.mark.parametrize(
    ("identity", "problem"),
    [
        (
            {"issuer": "https://idp.example.com", "jwks_uri": "https://idp.example.com/jwks"},
            "audience is required",
        ),
        ({**IDENTITY, "algorithms": ["HS256"]}, "settings.identity.algorithms"),
        ({**IDENTITY, "client_secret": "inline"}, "settings.identity"),
        ({**IDENTITY, "issuer": "http://idp.example.com"}, "must use https"),
        ({**IDENTITY, "introspection_url": "https://169.254.169.254/introspect"}, "introspection_url: The URL points to"),
    ],
)
def test_an_identity_a_tenant_could_not_use_is_refused_with_its_path(tenant_a, identity, problem) -> None:
    document = {
        "format": "mcp-platform/tenant",
        "version": 1,
        "tenant": "tenant-a",
        "settings": {"identity": identity},
    }
    with pytest.raises(DocumentError) as refused:
        import_document(tenant_a, document)
    assert problem in str(refused.value.problems)
    assert Tenant.objects.get(pk=tenant_a.pk).identity == {}
