"""Service clients (AMB-197): a program gets tokens for one tenant by the client credentials grant."""

from __future__ import annotations

import base64
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from oauth2_provider.models import AccessToken, Application

from mcp_app.api.tokens import api_client
from mcp_app.core.types import TenantInfo
from mcp_app.models import Tool
from mcp_app.oauth import resource_server, service_clients
from tenants.models import Membership, Role, Tenant
from tests.oauth.as_support import canonical

# The resource server reads the token on a thread of its own, which must see the committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


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


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def token(client, made: service_clients.Made, **data: str):
    return client.post(
        "/oauth/token",
        {"grant_type": "client_credentials", **data},
        HTTP_AUTHORIZATION=basic(made.client_id, made.client_secret),
    )


def caller_of(raw: str, tenant: Tenant):
    info = TenantInfo(id=tenant.pk, slug=tenant.slug, name=tenant.name, auth_mode=tenant.auth_mode)
    return async_to_sync(resource_server.authenticate)(f"Bearer {raw}", "", info)


def test_a_token_is_for_its_tenant_only_as_its_member_with_its_scope(client, vault, annex, robot) -> None:
    made = service_clients.create(vault, robot, "CI", "mcp:tools vault:open")
    response = token(client, made)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer" and "refresh_token" not in body
    assert set(body["scope"].split()) == {"mcp:tools", "vault:open"}
    stored = AccessToken.objects.get(application__client_id=made.client_id)
    assert stored.user == robot and stored.resource == [canonical("vault")]
    caller = caller_of(body["access_token"], vault)
    assert caller.user_id == robot.pk and set(caller.scopes) == {"mcp:tools", "vault:open"}
    # The member's other tenant does not take it: the token's audience is the client's tenant.
    with pytest.raises(resource_server.Refusal):
        caller_of(body["access_token"], annex)


def test_a_narrower_scope_may_be_asked_for_and_a_wider_one_is_refused(client, vault, robot) -> None:
    made = service_clients.create(vault, robot, "CI", "mcp:tools")
    assert token(client, made, scope="mcp:tools", resource=canonical("vault")).json()["scope"] == "mcp:tools"
    refused = token(client, made, scope="mcp:tools vault:open")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope"
    assert "mcp:tools" in refused.json()["error_description"]


def test_another_tenants_resource_is_invalid_target(client, vault, annex, robot) -> None:
    made = service_clients.create(vault, robot, "CI")
    refused = token(client, made, resource=canonical("annex"))
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_target"
    assert not AccessToken.objects.filter(application__client_id=made.client_id).exists()


def test_a_client_whose_member_left_gets_no_token_and_its_tokens_stop(client, vault, robot) -> None:
    made = service_clients.create(vault, robot, "CI")
    raw = token(client, made).json()["access_token"]
    Membership.objects.filter(user=robot, tenant=vault).delete()
    refused = token(client, made)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    with pytest.raises(resource_server.Refusal):
        caller_of(raw, vault)


def test_a_wrong_secret_is_invalid_client(client, vault, robot) -> None:
    made = service_clients.create(vault, robot, "CI")
    wrong = service_clients.Made(made.client_id, "not-the-secret", made.row)
    refused = token(client, wrong)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


def test_the_secret_may_be_posted_in_the_body(client, vault, robot) -> None:
    made = service_clients.create(vault, robot, "CI")
    response = client.post(
        "/oauth/token",
        {
            "grant_type": "client_credentials",
            "client_id": made.client_id,
            "client_secret": made.client_secret,
        },
    )
    assert response.status_code == 200, response.content


def test_only_a_service_client_may_use_the_grant(client, vault, robot) -> None:
    # The management API's client holds the grant type too (its tokens are minted directly).
    app = api_client()
    app.client_secret = "known-secret"
    app.save()
    refused = client.post(
        "/oauth/token",
        {"grant_type": "client_credentials", "resource": canonical("vault")},
        HTTP_AUTHORIZATION=basic(app.client_id, "known-secret"),
    )
    assert refused.status_code == 400 and refused.json()["error"] == "unauthorized_client"
    assert not AccessToken.objects.filter(application=app).exists()


def test_making_one_needs_a_member_an_oauth_tenant_and_known_scopes(
    django_user_model, vault, robot, db
) -> None:
    stranger = django_user_model.objects.create_user("stranger", "s@example.com", "stranger-pw-1")
    with pytest.raises(ValueError, match="not a member"):
        service_clients.create(vault, stranger, "CI")
    with pytest.raises(ValueError, match="Not a scope of vault: other:scope"):
        service_clients.create(vault, robot, "CI", "mcp:tools other:scope")
    public = Tenant.objects.create(slug="open", name="open", auth_mode="public")
    Membership.objects.create(user=robot, tenant=public, role=Role.OWNER)
    with pytest.raises(ValueError, match="public"):
        service_clients.create(public, robot, "CI")
    assert not Application.objects.filter(
        authorization_grant_type="client-credentials", user=stranger
    ).exists()


def test_the_command_prints_the_secret_last(client, vault, robot) -> None:
    out = StringIO()
    call_command("service_client", "vault", "--user", "robot", "--scope", "mcp:tools", stdout=out)
    lines = out.getvalue().strip().splitlines()
    client_id = lines[0].removeprefix("client_id: ")
    made = service_clients.Made(client_id, lines[-1], None)  # type: ignore[arg-type]
    assert token(client, made).json()["scope"] == "mcp:tools"
    with pytest.raises(CommandError, match="No active tenant"):
        call_command("service_client", "nowhere", "--user", "robot", stdout=StringIO())
