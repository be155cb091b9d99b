"""Single sign-on as a person meets it (AMB-212..214), in Chromium, against a real identity provider.

The provider is a second instance of our own platform (Daphne on a database of its own) with its
OpenID Connect provider on (MCP_OIDC_PROVIDER_RSA_KEY) and our platform registered there as a sign-in
client (RS256). Our platform (another Daphne, MCP_OIDC_ISSUER pointing at it) finds the provider's
endpoints by discovery, checks the signed id_token against its JWKS, creates the account, and gives a
membership of the tenant whose domain rule matches. The provider is served as `localhost` and ours as
`127.0.0.1`, so the browser keeps two sessions, as it would for two sites.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from playwright.async_api import BrowserContext, Page
from psycopg import sql

from tests.e2e import databases
from tests.e2e.browser import PAGE_MS, Callback, Screenshots, chromium, loopback_callback, sign_in
from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS
from tests.e2e.oauth_flow import authorize_url, pkce_pair, register, token_request
from tests.e2e.servers import DaphneServer, django_shell, manage, start_daphne, used_secret

pytestmark = [pytest.mark.e2e]

CLIENT_ID = "our-platform-" + secrets.token_hex(4)
CLIENT_SECRET = used_secret("sso-secret-" + secrets.token_urlsafe(24))
DANA_PASSWORD = used_secret("dana-idp-" + secrets.token_urlsafe(12))
URSULA_PASSWORD = used_secret("ursula-idp-" + secrets.token_urlsafe(12))
DOMAIN = f"acme-{secrets.token_hex(3)}.test"
SLUG = f"acme-{secrets.token_hex(3)}"

PROVIDER_SETUP = f"""
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import Application
from tenants.models import Invitation, Tenant
users = get_user_model().objects
home = Tenant.objects.create(slug='idp-home', name='The provider home')
dana = users.create_user('dana.idp', 'dana@{DOMAIN}', {DANA_PASSWORD!r})
# Dana proved her address by accepting an invitation to it: email_verified (AMB-214).
Invitation.objects.create(tenant=home, email='dana@{DOMAIN}', role='viewer', expires_at=timezone.now(),
                          accepted_at=timezone.now(), accepted_by=dana)
users.create_user('ursula.idp', 'ursula@{DOMAIN}', {URSULA_PASSWORD!r})  # an address nobody proved
Application.objects.create(
    name='Our MCP platform', client_id={CLIENT_ID!r}, client_secret={CLIENT_SECRET!r},
    client_type='confidential', authorization_grant_type='authorization-code',
    redirect_uris='http://127.0.0.1:1/sso/callback', algorithm='RS256',
)
"""


def _provider_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="module")
def provider_database(e2e_database_url: str) -> Iterator[str]:
    """The provider's own database: its accounts are not ours."""
    parts = urlsplit(e2e_database_url)
    if parts.scheme == "sqlite":
        yield e2e_database_url.replace("e2e.sqlite3", "provider.sqlite3")
        return
    name = f"mcp_e2e_idp_{secrets.token_hex(4)}"
    databases.clone_migrated(parts, name, os.environ.get("DATABASE_ROLE"))
    yield urlunsplit(parts._replace(path=f"/{name}"))
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def provider(
    e2e_env: dict[str, str], provider_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    env = {**e2e_env, "DATABASE_URL": provider_database, "MCP_OIDC_PROVIDER_RSA_KEY": _provider_key()}
    if provider_database.startswith("sqlite"):
        manage(env, "migrate", "--noinput")
    django_shell(env, PROVIDER_SETUP)
    daphne = start_daphne("daphne-idp", env, tmp_path_factory.mktemp("daphne-idp"), public_host="localhost")
    yield daphne
    daphne.stop()


@pytest.fixture(scope="module")
def ours(
    provider: DaphneServer, e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """Our platform with single sign-on at `provider`, and a tenant whose rule takes the provider's domain."""
    django_shell(
        e2e_env,
        "from tenants.models import Tenant\n"
        f"Tenant.objects.create(slug={SLUG!r}, name='Acme tools', sso_email_domains=[{DOMAIN!r}], sso_role='editor')\n",
    )
    env = {
        **e2e_env,
        "MCP_OIDC_ISSUER": provider.env["MCP_PUBLIC_URL"],
        "MCP_OIDC_CLIENT_ID": CLIENT_ID,
        "MCP_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "MCP_OIDC_PROVIDER_NAME": "Acme ID",
    }
    daphne = start_daphne("daphne-sso", env, tmp_path_factory.mktemp("daphne-sso"))
    django_shell(
        provider.env,
        "from oauth2_provider.models import Application\n"
        f"Application.objects.filter(client_id={CLIENT_ID!r}).update(redirect_uris={daphne.url + '/sso/callback'!r})\n",
    )
    yield daphne
    daphne.stop()


@pytest.fixture
async def context() -> AsyncIterator[BrowserContext]:
    async with chromium() as browser:
        ctx = await browser.new_context()
        ctx.set_default_timeout(PAGE_MS)
        yield ctx
        await ctx.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(request.node.name)


async def through_the_provider(page: Page, shots: Screenshots, username: str, password: str) -> None:
    """From our sign-in page: "Sign in with Acme ID", sign in at the provider, allow the sign-in there."""
    assert "Sign in with Acme ID" in await page.inner_text("body")
    await shots.take(page, "ours-sign-in")
    async with page.expect_navigation():
        await page.click("#sso-sign-in")
    assert urlsplit(page.url).hostname == "localhost", page.url  # at the provider now
    await shots.take(page, "provider-sign-in")
    await sign_in(page, username, password)
    body = await page.inner_text("body")
    assert "Sign in to Our MCP platform with your account here?" in body, body
    assert "It gets no access to any MCP server" in body
    await shots.take(page, "provider-consent")
    async with page.expect_navigation():
        await page.click("button[name=allow]")


async def test_a_person_without_an_account_signs_in_to_the_admin_with_the_provider(
    ours: DaphneServer, context: BrowserContext, shots: Screenshots
) -> None:
    page = await context.new_page()
    await page.goto(f"{ours.url}/admin/")
    assert "/admin/login/" in page.url
    await through_the_provider(page, shots, "dana.idp", DANA_PASSWORD)
    assert page.url.rstrip("/").endswith("/admin"), page.url
    await shots.take(page, "admin")
    await page.goto(f"{ours.url}/admin/tenants/tenant/")
    body = await page.inner_text("body")
    assert SLUG in body and "idp-home" not in body, body
    await shots.take(page, "tenants")
    who = django_shell(
        ours.env,
        "from tenants.models import Membership\n"
        f"m = Membership.objects.get(tenant__slug={SLUG!r}, user__email='dana@{DOMAIN}')\n"
        "print(m.user.username, m.role, m.granted_by, m.user.has_usable_password())\n",
    )
    assert who.split() == ["dana", "editor", "sso", "False"]


async def test_the_connect_flow_s_consent_page_signs_in_through_the_provider(
    ours: DaphneServer, context: BrowserContext, shots: Screenshots
) -> None:
    async with loopback_callback() as callback:
        await _connect(ours, context, shots, callback)


async def _connect(
    ours: DaphneServer, context: BrowserContext, shots: Screenshots, callback: Callback
) -> None:
    registered = await register(ours.url, redirect_uris=[callback.url], client_name="Acme agent")
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce_pair()
    resource = ours.mcp_url(SLUG)
    url = authorize_url(
        ours.url, response_type="code", client_id=client_id, redirect_uri=callback.url, scope="mcp:tools",
        state="s-1", code_challenge=challenge, code_challenge_method="S256", resource=resource,
    )  # fmt: skip
    page = await context.new_page()
    await page.goto(url)
    assert "/oauth/login" in page.url
    await through_the_provider(page, shots, "dana.idp", DANA_PASSWORD)
    body = await page.inner_text("body")
    assert "Allow Acme agent to use" in body and "Acme tools" in body, body  # back at our consent page
    await shots.take(page, "ours-consent")
    await page.click("button[name=allow]")
    said = await callback.next()
    assert said.get("state") == "s-1" and "code" in said, said
    issued = await token_request(
        ours.url, grant_type="authorization_code", code=said["code"], redirect_uri=callback.url,
        client_id=client_id, code_verifier=verifier, resource=resource,
    )  # fmt: skip
    assert issued.status_code == 200, issued.text
    async with httpx.AsyncClient(timeout=20) as http:
        answer = await http.post(
            resource,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {issued.json()['access_token']}"},
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
        )
    assert answer.status_code == 200 and "serverInfo" in answer.text, answer.text


async def test_an_address_the_provider_never_verified_is_refused_with_a_page(
    ours: DaphneServer, context: BrowserContext, shots: Screenshots
) -> None:
    page = await context.new_page()
    await page.goto(f"{ours.url}/admin/login/?next=/admin/")
    await through_the_provider(page, shots, "ursula.idp", URSULA_PASSWORD)
    body = await page.inner_text("body")
    assert "The sign-in was refused" in body and f"ursula@{DOMAIN} is not verified" in body, body
    await shots.take(page, "refused")
    await page.goto(f"{ours.url}/admin/")
    assert "/admin/login/" in page.url  # not signed in


def test_the_provider_publishes_its_openid_configuration_and_key(provider: DaphneServer) -> None:
    issuer = provider.env["MCP_PUBLIC_URL"]
    document = httpx.get(f"{provider.url}/.well-known/openid-configuration").json()
    assert document["issuer"] == issuer and document["jwks_uri"] == f"{issuer}/oauth/.well-known/jwks.json"
    assert "openid" in document["scopes_supported"] and document["id_token_signing_alg_values_supported"] == [
        "RS256"
    ]
    keys = httpx.get(f"{provider.url}/oauth/.well-known/jwks.json").json()["keys"]
    assert [k["alg"] for k in keys] == ["RS256"] and all("d" not in k for k in keys)  # public halves only
