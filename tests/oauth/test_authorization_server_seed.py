"""seed_demo's OAuth demo: the `secure` tenant and a member whose login it prints."""

from __future__ import annotations

from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from mcp_app.models import Tool
from tenants.models import Membership, Tenant


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def test_seed_demo_creates_the_secure_oauth_tenant_and_prints_its_members_login(db, monkeypatch):
    monkeypatch.delenv("MCP_SECURE_USER_PASSWORD", raising=False)
    output = seed()
    tenant = Tenant.objects.get(slug="secure")
    assert tenant.auth_mode == "oauth" and tenant.is_active
    assert Tenant.objects.get(slug="demo").auth_mode == "public"
    assert Tool.objects.get(tenant=tenant, name="read_vault").required_scope == "secure:vault"
    user = get_user_model().objects.get(username="secure-user")
    assert Membership.objects.filter(user=user, tenant=tenant).exists()
    assert not user.is_staff
    line = next(
        line for line in output.splitlines() if line.startswith("Secure tenant login: secure-user / ")
    )
    assert user.check_password(line.rsplit(" / ", 1)[1])
    assert "MCP URL (OAuth, sign in as secure-user): http://127.0.0.1:8000/t/secure/mcp" in output


def test_seed_demo_takes_the_secure_password_from_the_environment_and_is_idempotent(db, monkeypatch):
    monkeypatch.setenv("MCP_SECURE_USER_PASSWORD", "secure-pw-123")
    first = seed()
    second = seed()
    assert "secure-user / secure-pw-123" in first
    assert "secure-user / " not in second and "OAuth tenant 'secure': tenant kept; " in second
    assert get_user_model().objects.get(username="secure-user").check_password("secure-pw-123")
    assert Membership.objects.filter(user__username="secure-user").count() == 1
