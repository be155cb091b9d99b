"""Key rotation (issue 13): several keys at once, `rotate_secrets`, and SECRET_KEY_FALLBACKS for signatures."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from mcp_app.handlers.secrets import SecretsError, decrypt_secrets, encrypt_secrets
from mcp_app.models import Connection, Provider, Tool, Upstream
from mcp_app.protocol import pagination
from tenants.models import Tenant
from tests.support import make_ctx

pytestmark = pytest.mark.django_db

NEW_KEY = "the new secret key, long and random enough for a test of key rotation"


@pytest.fixture
def tools_with_secrets(tenant_a: Any, tenant_b: Any, monkeypatch: Any) -> list[Tool]:
    monkeypatch.delenv("MCP_SECRETS_KEY", raising=False)
    made = []
    for tenant, name in ((tenant_a, "one"), (tenant_b, "two")):
        made.append(
            Tool.objects.create(
                tenant=tenant,
                name=name,
                handler="http",
                handler_config={"url": "https://example.com/x"},
                handler_secrets=encrypt_secrets({"Authorization": f"Bearer {name}"}),
            )
        )
    return made


def rotate(*args: str) -> str:
    out = StringIO()
    call_command("rotate_secrets", *args, stdout=out)
    return out.getvalue()


def test_rotate_secrets_re_encrypts_every_tool_so_the_old_key_can_go(tools_with_secrets, settings):
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    history_before = Tool.history.count()
    assert "re-encrypted the secrets of 2 tool(s)" in rotate()
    assert Tool.history.count() == history_before  # nothing a client sees changed: no new version
    settings.SECRET_KEY_FALLBACKS = []
    assert [decrypt_secrets(t.handler_secrets) for t in Tool.objects.order_by("name")] == [
        {"Authorization": "Bearer one"},
        {"Authorization": "Bearer two"},
    ]


def test_a_dry_run_rewrites_nothing(tools_with_secrets, settings):
    before = list(Tool.objects.order_by("name").values_list("handler_secrets", flat=True))
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    assert "would re-encrypt the secrets of 2 tool(s)" in rotate("--dry-run")
    assert list(Tool.objects.order_by("name").values_list("handler_secrets", flat=True)) == before


def test_secrets_no_key_can_read_are_named_and_the_rest_still_rotated(tools_with_secrets, settings):
    Tool.objects.filter(name="two").update(
        handler_secrets=encrypt_secrets({"X": "written elsewhere"})[:-8] + "AAAAAAA="
    )
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    with pytest.raises(CommandError, match="tenant-b/two") as info:
        rotate()
    assert "written elsewhere" not in str(info.value)
    settings.SECRET_KEY_FALLBACKS = []
    assert decrypt_secrets(Tool.objects.get(name="one").handler_secrets) == {"Authorization": "Bearer one"}
    with pytest.raises(SecretsError):
        decrypt_secrets(Tool.objects.get(name="two").handler_secrets)


def test_a_cursor_signed_before_the_secret_key_changed_still_verifies_with_the_old_key_as_fallback(
    tenant_a, settings
):
    ctx = make_ctx(tenant_a)
    cursor = pagination.encode_cursor(ctx, "tools", "k")
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    assert pagination.decode_cursor(ctx, "tools", cursor) == "k"
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(Exception, match="(?i)cursor"):
        pagination.decode_cursor(ctx, "tools", cursor)


def test_rotate_secrets_re_encrypts_upstream_servers_secret_headers_too(tenant_a, settings, monkeypatch):
    monkeypatch.delenv("MCP_SECRETS_KEY", raising=False)
    upstream = Upstream.objects.create(
        tenant=tenant_a,
        name="docs",
        url="https://mcp.example.com/mcp",
        secret_headers=encrypt_secrets({"Authorization": "Bearer upstream"}),
    )
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    assert "re-encrypted the secrets of 0 tool(s) and 1 upstream server(s)" in rotate()
    settings.SECRET_KEY_FALLBACKS = []
    upstream.refresh_from_db()
    assert decrypt_secrets(upstream.secret_headers) == {"Authorization": "Bearer upstream"}


def test_rotate_secrets_re_encrypts_providers_client_secrets_and_connections_tokens(
    tenant_a, settings, monkeypatch, django_user_model
):
    monkeypatch.delenv("MCP_SECRETS_KEY", raising=False)
    provider = Provider.objects.create(
        tenant=tenant_a,
        name="github",
        display_name="GitHub",
        discovery_url="https://github.example.com",
        client_id="c",
        client_secret=encrypt_secrets({"client_secret": "provider secret"}),
    )
    connection = Connection.objects.create(
        tenant=tenant_a,
        provider=provider,
        user=django_user_model.objects.create_user("connected"),
        tokens=encrypt_secrets({"access_token": "at", "refresh_token": "rt"}),
    )
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    assert "and 2 provider secret(s) and connection(s)" in rotate()
    settings.SECRET_KEY_FALLBACKS = []
    provider.refresh_from_db()
    connection.refresh_from_db()
    assert provider.secret() == "provider secret"
    assert connection.token_set() == {"access_token": "at", "refresh_token": "rt"}


def test_rotate_secrets_re_encrypts_a_tenants_identity_provider_secret_too(tenant_a, settings, monkeypatch):
    monkeypatch.delenv("MCP_SECRETS_KEY", raising=False)
    Tenant.objects.filter(pk=tenant_a.pk).update(
        identity_client_secret=encrypt_secrets({"client_secret": "rs"})
    )
    settings.SECRET_KEY_FALLBACKS, settings.SECRET_KEY = [settings.SECRET_KEY], NEW_KEY
    assert "re-encrypted the identity provider secrets of 1 tenant(s)" in rotate()
    settings.SECRET_KEY_FALLBACKS = []
    assert decrypt_secrets(Tenant.objects.get(pk=tenant_a.pk).identity_client_secret) == {
        "client_secret": "rs"
    }
