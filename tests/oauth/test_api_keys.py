"""API keys (AMB-202): a headless client calls one tenant's endpoint with a key an owner minted."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import Action, AuditEvent
from mcp_app.core.types import ExternalIdentity, TenantInfo
from mcp_app.models import Tool
from mcp_app.oauth import api_keys, resource_server, tokens
from tenants.models import ApiKey, Membership, Role, Tenant

# The resource server reads the key on a thread of its own, which must see the committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_caches():
    tokens.reset()
    api_keys.reset()
    yield
    tokens.reset()
    api_keys.reset()


@pytest.fixture
def vault(db) -> Tenant:
    tenant = Tenant.objects.create(slug="vault", name="vault", auth_mode="oauth")
    Tool.objects.create(tenant=tenant, name="open_safe", handler="template", required_scope="vault:open")
    return tenant


@pytest.fixture
def annex(db) -> Tenant:
    return Tenant.objects.create(slug="annex", name="annex", auth_mode="oauth")


@pytest.fixture
def robot(django_user_model, vault, annex):
    user = django_user_model.objects.create_user("robot", "robot@example.com", "robot-pw-123")
    Membership.objects.create(user=user, tenant=vault, role=Role.VIEWER)
    Membership.objects.create(user=user, tenant=annex, role=Role.OWNER)
    return user


def info(tenant: Tenant) -> TenantInfo:
    return TenantInfo(id=tenant.pk, slug=tenant.slug, name=tenant.name, auth_mode=tenant.auth_mode)


def caller_of(raw: str, tenant: Tenant, address: str | None = "127.0.0.1", query: str = ""):
    return async_to_sync(resource_server.authenticate)(f"Bearer {raw}", query, info(tenant), address)


def refusal(raw: str, tenant: Tenant, address: str | None = "127.0.0.1", query: str = "") -> str:
    with pytest.raises(resource_server.Refusal) as refused:
        caller_of(raw, tenant, address, query)
    assert refused.value.status == 401
    return refused.value.message


def test_a_key_acts_as_its_member_with_its_scope_at_its_tenant_only(vault, annex, robot) -> None:
    made = api_keys.create(vault, robot, "CI", "mcp:tools vault:open")
    assert made.key.startswith("mcpk_") and len(made.key) > 40
    row = ApiKey.objects.get()
    assert row.key_hash == tokens.checksum(made.key) and made.key not in row.prefix + row.key_hash
    assert made.key.startswith(row.prefix) and len(row.prefix) == 13
    caller = caller_of(made.key, vault)
    assert caller.user_id == robot.pk and caller.client_id == f"api-key:{row.pk}"
    assert caller.scopes == {"mcp:tools", "vault:open"}
    # The member's other tenant answers exactly as for a made-up key.
    assert refusal(made.key, annex) == refusal("mcpk_" + "x" * 43, annex)
    assert tokens.UNKNOWN in refusal(made.key, annex)


def test_a_service_identity_key_has_no_user_and_its_own_client(vault) -> None:
    made = api_keys.create(vault, None, "nightly", "")
    caller = caller_of(made.key, vault)
    assert caller.user_id is None and caller.client_id == f"api-key:{made.row.pk}"
    assert caller.scopes == {"mcp:tools", "mcp:prompts", "mcp:resources"}


def test_a_revoked_key_is_refused_at_once_though_it_was_cached(vault, robot, settings) -> None:
    settings.MCP_TOKEN_CACHE_SECONDS = 3600
    made = api_keys.create(vault, robot, "CI")
    assert caller_of(made.key, vault).user_id == robot.pk
    api_keys.revoke(made.row, robot)
    assert tokens.UNKNOWN in refusal(made.key, vault)
    assert ApiKey.objects.get().status == "revoked"
    keys = AuditEvent.objects.filter(action__startswith="api_key").order_by("pk")
    assert list(keys.values_list("action", "client_id")) == [
        (Action.API_KEY_CREATED, f"api-key:{made.row.pk}"),
        (Action.API_KEY_REVOKED, f"api-key:{made.row.pk}"),
    ]


def test_an_expired_key_and_a_departed_member_are_refused(vault, robot, settings) -> None:
    settings.MCP_TOKEN_CACHE_SECONDS = 3600
    made = api_keys.create(vault, robot, "CI")
    ApiKey.objects.filter(pk=made.row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    tokens.reset()
    assert tokens.EXPIRED in refusal(made.key, vault)
    other = api_keys.create(vault, robot, "CI 2")
    assert caller_of(other.key, vault).user_id == robot.pk
    Membership.objects.filter(user=robot, tenant=vault).delete()  # evicts the cached answer
    assert tokens.NOT_MEMBER in refusal(other.key, vault)


def test_the_address_allow_list(vault, robot) -> None:
    made = api_keys.create(vault, robot, "CI", addresses="10.1.0.0/16\n2001:db8::/32, 192.0.2.7")
    assert made.row.allowed_addresses == "10.1.0.0/16\n2001:db8::/32\n192.0.2.7/32"
    assert caller_of(made.key, vault, "10.1.200.3").user_id == robot.pk
    assert caller_of(made.key, vault, "2001:db8::1").user_id == robot.pk
    assert caller_of(made.key, vault, "192.0.2.7").user_id == robot.pk
    for address in ("10.2.0.1", "192.0.2.8", None, "not-an-address"):
        assert api_keys.WRONG_ADDRESS in refusal(made.key, vault, address)


def test_a_key_in_the_query_string_is_refused_and_never_read(vault, robot) -> None:
    made = api_keys.create(vault, robot, "CI")
    with pytest.raises(resource_server.Refusal) as refused:
        caller_of(made.key, vault, query=f"key={made.key}")
    assert refused.value.status == 400 and "revoke it" in refused.value.message
    assert b"invalid_request" in refused.value.headers[0][1]
    with pytest.raises(resource_server.Refusal) as alone:
        async_to_sync(resource_server.authenticate)(None, f"api_key={made.key}", info(vault), "127.0.0.1")
    assert alone.value.status == 400


def test_step_up_a_key_without_a_tools_scope_is_refused_with_insufficient_scope(vault, robot) -> None:
    made = api_keys.create(vault, robot, "CI", "mcp:tools")
    caller = caller_of(made.key, vault)
    with pytest.raises(resource_server.Refusal) as refused:
        resource_server.check_scopes(caller, info(vault), {"mcp:tools", "vault:open"}, ["open_safe"])
    assert refused.value.status == 403 and "vault:open" in refused.value.message


@pytest.mark.parametrize(
    ("user", "scope", "days", "addresses", "says"),
    [
        (None, "mcp:tools nope:x", 30, "", "Not a scope of vault: nope:x."),
        (None, "", 0, "", "A key lasts 1 to 730 days."),
        (None, "", 731, "", "A key lasts 1 to 730 days."),
        (None, "", 30, "10.0.0.0/8\nbogus", "'bogus' is not an IP address or network"),
        ("outsider", "", 30, "", "outsider is not a member of vault"),
    ],
)
def test_what_cannot_be_minted_says_why(vault, django_user_model, user, scope, days, addresses, says) -> None:
    who = django_user_model.objects.create_user(user) if user else None
    with pytest.raises(ValueError) as refused:
        api_keys.create(vault, who, "CI", scope, days, addresses)
    assert says in str(refused.value)
    assert not ApiKey.objects.exists()


def test_a_public_tenant_mints_no_key(db) -> None:
    open_ = Tenant.objects.create(slug="open", name="open", auth_mode="public")
    with pytest.raises(ValueError, match="is public"):
        api_keys.create(open_, None, "CI")


def test_use_is_recorded_once_a_minute_off_the_request_path(vault, robot) -> None:
    made = api_keys.create(vault, robot, "CI")

    async def three_calls() -> None:
        for _ in range(3):
            await resource_server.authenticate(f"Bearer {made.key}", "", info(vault), "127.0.0.1")
        await asyncio.gather(*api_keys._noting)

    async_to_sync(three_calls)()
    first = ApiKey.objects.get().last_used_at
    assert first is not None and timezone.now() - first < timedelta(seconds=30)
    ApiKey.objects.update(last_used_at=None)
    async_to_sync(three_calls)()
    assert ApiKey.objects.get().last_used_at is None  # within the minute: not written again


def test_the_command_prints_the_key_alone_on_its_last_line(vault, robot) -> None:
    out = StringIO()
    call_command("mcp_key", "vault", "--user", "robot", "--scope", "mcp:tools", "--days", "7", stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    assert key.startswith("mcpk_") and caller_of(key, vault).scopes == {"mcp:tools"}
    assert ApiKey.objects.get().expires_at - timezone.now() > timedelta(days=6)
    service = StringIO()
    call_command("mcp_key", "vault", "--service", "--allow", "127.0.0.1", stdout=service)
    assert "acts as: the tenant" in service.getvalue()
    with pytest.raises(CommandError, match="Not a scope of annex: vault:open"):
        call_command("mcp_key", "annex", "--user", "robot", "--scope", "vault:open", stdout=StringIO())
    with pytest.raises(CommandError, match="No active user 'ghost'"):
        call_command("mcp_key", "vault", "--user", "ghost", stdout=StringIO())
    with pytest.raises(CommandError, match="No active tenant"):
        call_command("mcp_key", "nowhere", "--service", stdout=StringIO())


def test_a_key_works_at_a_tenant_whose_people_sign_in_with_its_own_identity_provider(vault, robot) -> None:
    made = api_keys.create(vault, robot, "CI", "mcp:tools")
    # An issuer nobody runs: a key never reaches it, and a token that is not a key would.
    idp = ExternalIdentity(
        issuer="https://idp.invalid", audience="vault", jwks_uri="https://idp.invalid/jwks"
    )
    tenant = TenantInfo(id=vault.pk, slug=vault.slug, name=vault.name, auth_mode="oauth", identity=idp)
    caller = async_to_sync(resource_server.authenticate)(f"Bearer {made.key}", "", tenant, "127.0.0.1")
    assert caller.user_id == robot.pk and caller.scopes == {"mcp:tools"}
