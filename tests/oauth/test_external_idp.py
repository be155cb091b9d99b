"""A tenant's own identity provider (AMB-203..206): its access tokens at the tenant's MCP endpoint.

The provider is a real authorization server (tests/oauth/idp_server.py, joserfc under uvicorn, in its
own process), reached over HTTP through the SSRF guard; the endpoint is the real consumer. Every
refusal is answered exactly: 401, `WWW-Authenticate: Bearer error="invalid_token"` and a readable
error_description; a tool's own scope is stepped up with 403 insufficient_scope.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async as sync_to_async
from django.core.exceptions import ValidationError
from django.test import Client as DjangoClient

from mcp_app import catalog
from mcp_app.core.scopes import PROMPTS, RESOURCES, TOOLS
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Tool
from mcp_app.oauth import external_tokens, resources, tokens
from mcp_app.protocol import quotas
from tenants.models import Tenant
from tests.oauth.idp_support import IdentityProvider, running_identity_provider
from tests.oauth.rs_support import AuthClient, issue_token, make_application
from tests.support import make_ctx
from tests.transport.conftest import clean_transport_state  # noqa: F401 - autouse fixture

pytestmark = pytest.mark.django_db(transaction=True)

AUD_A = "https://mcp.example.com/tenant-a"
AUD_B = "https://mcp.example.com/tenant-b"
SCOPES = f"{TOOLS} {PROMPTS} {RESOURCES}"


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_identity_provider() as provider:
        yield provider


@pytest.fixture(scope="module")
def idp_b() -> Iterator[IdentityProvider]:
    with running_identity_provider() as provider:
        yield provider


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> Iterator[None]:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_IDENTITY_ALLOW_HTTP_LOOPBACK = True
    settings.MCP_IDENTITY_JWKS_REFETCH_SECONDS = 2
    settings.MCP_IDENTITY_FETCH_SECONDS = 2
    settings.MCP_IDENTITY_LEEWAY_SECONDS = 5
    external_tokens.reset()
    tokens.reset()
    yield
    external_tokens.reset()


def configure(tenant: Tenant, identity: dict[str, Any], secret: str = "") -> None:
    tenant.auth_mode = "oauth"
    tenant.identity = identity
    if secret:
        tenant.identity_client_secret = encrypt_secrets({"client_secret": secret})
    tenant.full_clean()
    tenant.save()
    catalog.clear_caches()


@pytest.fixture
def jwt_tenant(tenant_a: Tenant, idp: IdentityProvider) -> Tenant:
    configure(tenant_a, {"issuer": idp.url, "jwks_uri": idp.jwks_uri, "audience": AUD_A})
    Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        handler="python",
        handler_config={"callable": "echo"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="payroll",
        input_schema={"type": "object", "properties": {}},
        handler="template",
        handler_config={"text": "salaries"},
        required_scope="payroll:read",
    )
    catalog.clear_caches()
    return tenant_a


async def call(token: str, name: str = "echo", slug: str = "tenant-a") -> Any:
    """tools/call in a new legacy session (its initialize refused as the call is, when it is)."""
    client = AuthClient(slug, token=token)
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    opened = await client.request("initialize", params, id=0)
    if opened.status != 200:
        return opened
    client.session_id = opened.headers["mcp-session-id"]
    client.version = "2025-06-18"
    await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    arguments = {"message": "hi"} if name == "echo" else {}
    return await client.request("tools/call", {"name": name, "arguments": arguments})


def refused_with(response: Any, description: str) -> None:
    assert response.status == 401, response.body
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"'), challenge
    assert f'error_description="{description}"' in challenge, challenge
    assert description.encode() in response.body


# --- accepted -----------------------------------------------------------------------------------


async def test_a_token_of_the_tenants_identity_provider_calls_tools(jwt_tenant, idp):
    token = idp.token(AUD_A, SCOPES)
    response = await call(token)
    assert response.status == 200, response.body
    assert response.json()["result"]["content"][0]["text"] == "hi"
    client = AuthClient(token=token)
    await client.initialize()
    listed = await client.request("tools/list")
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["echo", "payroll"]


async def test_the_scp_claim_carries_scopes_when_configured(jwt_tenant, idp):
    await sync_to_async(configure)(
        jwt_tenant,
        {"issuer": idp.url, "jwks_uri": idp.jwks_uri, "audience": AUD_A, "scope_claim": "scp"},
    )
    as_list = idp.mint(idp.claims(AUD_A, scope="", scp=[TOOLS]))
    assert (await call(as_list)).status == 200
    only_scope = idp.mint(idp.claims(AUD_A, scope=TOOLS))
    response = await call(only_scope)
    assert response.status == 403 and 'error="insufficient_scope"' in response.headers["www-authenticate"]


# --- refused: each case its own answer -------------------------------------------------------------


async def test_a_token_of_another_issuer_is_refused(jwt_tenant, idp, idp_b):
    refused_with(await call(idp_b.token(AUD_A, SCOPES)), external_tokens.UNKNOWN_KID)
    # Signed by the right keys but claiming another issuer.
    refused_with(await call(idp.mint(idp.claims(AUD_A, iss=idp_b.url))), external_tokens.WRONG_ISSUER)


async def test_a_token_for_another_audience_is_refused(jwt_tenant, idp):
    refused_with(await call(idp.token(AUD_B, SCOPES)), external_tokens.WRONG_AUDIENCE)
    refused_with(await call(idp.mint(idp.claims([AUD_B, "other"]))), external_tokens.WRONG_AUDIENCE)


async def test_expired_and_not_yet_valid_tokens_are_refused_past_the_leeway(jwt_tenant, idp):
    now = int(time.time())
    refused_with(await call(idp.mint(idp.claims(AUD_A, exp=now - 60))), external_tokens.EXPIRED)
    refused_with(await call(idp.mint(idp.claims(AUD_A, nbf=now + 60))), external_tokens.NOT_YET_VALID)
    # Within the leeway (5 s here) both pass: clocks differ a little.
    assert (await call(idp.mint(idp.claims(AUD_A, exp=now - 1, scope=TOOLS)))).status == 200
    assert (await call(idp.mint(idp.claims(AUD_A, nbf=now + 2, scope=TOOLS)))).status == 200
    no_exp = idp.claims(AUD_A)
    del no_exp["exp"]
    refused_with(await call(idp.mint(no_exp)), external_tokens.NO_EXPIRY)


async def test_alg_none_and_hs256_signed_with_the_public_key_are_refused(jwt_tenant, idp):
    claims = idp.claims(AUD_A, scope=SCOPES)
    response = await call(idp.unsigned(claims))
    refused_with(
        response,
        "The access token is signed with 'none', which this endpoint does not accept (it takes RS256).",
    )
    forged = idp.unsigned(claims, alg="HS256", secret=idp.public_key_pem())
    refused_with(
        await call(forged),
        "The access token is signed with 'HS256', which this endpoint does not accept (it takes RS256).",
    )
    # Even a tenant that listed HS256 could not save it: asymmetric algorithms only.
    jwt_tenant.identity = {**jwt_tenant.identity, "algorithms": ["RS256", "HS256"]}
    with pytest.raises(ValidationError, match="asymmetric only"):
        await sync_to_async(jwt_tenant.full_clean)()


async def test_a_bad_signature_and_garbage_are_refused(jwt_tenant, idp):
    good = idp.token(AUD_A, SCOPES)
    header, payload, signature = good.split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}AAAA"
    refused_with(await call(tampered), external_tokens.BAD_SIGNATURE)
    refused_with(await call("a.b.c"), external_tokens.MALFORMED)
    refused_with(await call("opaque-token-but-no-introspection"), external_tokens.NOT_JWT)


async def test_an_unknown_kid_refetches_the_jwks_at_most_once_per_interval(jwt_tenant, idp, settings):
    settings.MCP_IDENTITY_JWKS_REFETCH_SECONDS = 60  # however slow the machine, the flood is within it
    assert (await call(idp.token(AUD_A, SCOPES))).status == 200  # keys fetched
    for kept in external_tokens._keys.values():
        kept.tried_at -= 61  # as if the interval had passed: one refetch is allowed
    before = idp.stats()["jwks_fetches"]
    made_up = [idp.mint(idp.claims(AUD_A, jti=str(n)), kid=f"made-up-{n}") for n in range(20)]
    for response in await asyncio.gather(*(call(token) for token in made_up)):
        refused_with(response, external_tokens.UNKNOWN_KID)
    assert idp.stats()["jwks_fetches"] - before == 1  # 20 made-up kids, one fetch
    refused_with(await call(idp.mint(idp.claims(AUD_A), kid="one-more")), external_tokens.UNKNOWN_KID)
    assert idp.stats()["jwks_fetches"] - before == 1  # and none more within the interval


async def test_rotated_keys_are_taken_after_one_refetch(jwt_tenant, idp):
    assert (await call(idp.token(AUD_A, SCOPES))).status == 200
    await asyncio.sleep(2.1)  # past MCP_IDENTITY_JWKS_REFETCH_SECONDS since the last fetch
    before = idp.stats()["jwks_fetches"]
    new_kid = idp.rotate()
    rotated = idp.token(AUD_A, SCOPES)
    assert json.loads(base64.urlsafe_b64decode(rotated.split(".")[0] + "=="))["kid"] == new_kid
    assert (await call(rotated)).status == 200
    assert (await call(idp.token(AUD_A, SCOPES))).status == 200
    assert idp.stats()["jwks_fetches"] - before == 1


async def test_a_tools_own_scope_is_stepped_up_with_403(jwt_tenant, idp):
    response = await call(idp.token(AUD_A, SCOPES), name="payroll")
    assert response.status == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and "payroll:read" in challenge
    assert (await call(idp.token(AUD_A, f"{SCOPES} payroll:read"), name="payroll")).status == 200


async def test_another_tenants_tokens_are_refused_here(jwt_tenant, tenant_b, idp, idp_b):
    await sync_to_async(configure)(
        tenant_b, {"issuer": idp_b.url, "jwks_uri": idp_b.jwks_uri, "audience": AUD_B}
    )
    token_b = idp_b.token(AUD_B, SCOPES)
    refused_with(await call(token_b, slug="tenant-a"), external_tokens.UNKNOWN_KID)
    refused_with(await call(idp.token(AUD_A, SCOPES), slug="tenant-b"), external_tokens.UNKNOWN_KID)


# --- introspection ---------------------------------------------------------------------------------


async def test_opaque_tokens_by_introspection_and_revocation(jwt_tenant, idp, settings):
    settings.MCP_IDENTITY_CACHE_SECONDS = 1
    await sync_to_async(configure)(
        jwt_tenant,
        {"issuer": idp.url, "introspection_url": idp.introspection_url, "client_id": "rs", "audience": AUD_A},
        "rs-secret",
    )
    token = idp.token(AUD_A, SCOPES, opaque=True)
    assert (await call(token)).status == 200
    idp.revoke(token)
    await asyncio.sleep(1.1)  # the accepted verdict is kept MCP_IDENTITY_CACHE_SECONDS
    refused_with(await call(token), external_tokens.INACTIVE)
    refused_with(await call(idp.token(AUD_B, SCOPES, opaque=True)), external_tokens.WRONG_AUDIENCE)


async def test_a_wrong_introspection_secret_answers_503_not_401(jwt_tenant, idp):
    identity = {
        "issuer": idp.url,
        "introspection_url": idp.introspection_url,
        "client_id": "rs",
        "audience": AUD_A,
    }
    await sync_to_async(configure)(jwt_tenant, identity, "wrong")
    response = await call(idp.token(AUD_A, SCOPES, opaque=True))
    assert response.status == 503
    assert b"introspection endpoint answered HTTP 401" in response.body


# --- an unreachable issuer ---------------------------------------------------------------------------


async def test_an_unreachable_issuer_answers_503_quickly(jwt_tenant, idp):
    dead = "http://127.0.0.1:9"  # discard: nothing listens
    await sync_to_async(configure)(
        jwt_tenant, {"issuer": idp.url, "jwks_uri": f"{dead}/jwks", "audience": AUD_A}
    )
    started = time.monotonic()
    response = await call(idp.token(AUD_A, SCOPES))
    assert response.status == 503
    assert b"could not be reached" in response.body and response.headers["retry-after"] == "5"
    assert time.monotonic() - started < 3


# --- our own tokens beside -------------------------------------------------------------------------


async def test_platform_tokens_are_refused_unless_kept(jwt_tenant, idp, alice):
    ours = await sync_to_async(issue_token)(alice, jwt_tenant, await sync_to_async(make_application)())
    refused_with(await call(ours), external_tokens.NOT_JWT)
    identity = {**jwt_tenant.identity, "keep_platform_tokens": True}
    await sync_to_async(configure)(jwt_tenant, identity)
    assert (await call(ours)).status == 200
    assert (await call(idp.token(AUD_A, SCOPES))).status == 200


# --- metadata and validation -------------------------------------------------------------------------


def test_metadata_names_the_identity_provider_and_ours_only_when_kept(jwt_tenant, idp):
    url = "/.well-known/oauth-protected-resource/t/tenant-a/mcp"
    assert DjangoClient().get(url).json()["authorization_servers"] == [idp.url]
    configure(jwt_tenant, {**jwt_tenant.identity, "keep_platform_tokens": True})
    assert DjangoClient().get(url).json()["authorization_servers"] == [idp.url, resources.issuer()]


@pytest.mark.parametrize(
    ("identity", "problem"),
    [
        (
            {"issuer": "https://idp.example.com", "jwks_uri": "https://idp.example.com/jwks"},
            "audience is required",
        ),
        (
            {"issuer": "http://idp.example.com", "jwks_uri": "https://idp.example.com/jwks", "audience": "x"},
            "must use https",
        ),
        ({"issuer": "https://idp.example.com", "audience": "x"}, "Give jwks_uri"),
        (
            {
                "issuer": "https://i.example",
                "jwks_uri": "https://i.example/j",
                "audience": "x",
                "algorithms": ["none"],
            },
            "never none",
        ),
        (
            {
                "issuer": "https://i.example",
                "jwks_uri": "https://i.example/j",
                "audience": "x",
                "scope_claim": "roles",
            },
            "scope_claim",
        ),
    ],
)
def test_an_identity_is_checked_on_save(tenant_a, identity, problem):
    tenant_a.identity = identity
    with pytest.raises(ValidationError, match=problem):
        tenant_a.full_clean()


async def test_a_session_belongs_to_its_subject_not_to_the_client(jwt_tenant, idp):
    alice = AuthClient(token=idp.token(AUD_A, SCOPES, subject="alice"))
    await alice.initialize()
    assert (await alice.request("tools/list")).status == 200
    # Same OAuth client, another user of the identity provider, alice's session id: not theirs.
    mallory = AuthClient(token=idp.token(AUD_A, SCOPES, subject="mallory"))
    mallory.session_id, mallory.version = alice.session_id, alice.version
    assert (await mallory.request("tools/list")).status == 404


async def test_a_hanging_issuer_at_one_tenant_does_not_slow_another(
    jwt_tenant, tenant_b, idp, idp_b, settings
):
    settings.MCP_IDENTITY_FETCH_SECONDS = 3
    with socket.socket() as hanging:  # takes connections (the kernel's backlog), never answers
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(256)
        jwks_a = f"http://127.0.0.1:{hanging.getsockname()[1]}/jwks"
        await sync_to_async(configure)(jwt_tenant, {"issuer": idp.url, "jwks_uri": jwks_a, "audience": AUD_A})
        b_identity = {"issuer": idp_b.url, "jwks_uri": idp_b.jwks_uri, "audience": AUD_B}
        await sync_to_async(configure)(tenant_b, b_identity)
        flood = [idp.mint(idp.claims(AUD_A, jti=str(n))) for n in range(30)]
        token_b = idp_b.token(AUD_B, SCOPES)
        started = time.monotonic()
        pending = [asyncio.create_task(call(token)) for token in flood]
        await asyncio.sleep(0.3)  # tenant A's requests all wait on its issuer now
        assert not any(task.done() for task in pending)
        b_started = time.monotonic()
        assert (await call(token_b, slug="tenant-b")).status == 200
        assert time.monotonic() - b_started < 2  # not behind A's 3 s
        answers = await asyncio.gather(*pending)
        assert time.monotonic() - started < 3 + 1.5  # one fetch for all 30, ended by the deadline
        assert {answer.status for answer in answers} == {503}
        assert b"did not answer within 3 s" in answers[0].body


def test_an_identity_providers_users_are_each_their_own_caller_for_quotas(tenant_a):
    """Per-caller quotas key by the subject, not by the OAuth client the users share (AMB-204)."""
    one = make_ctx(tenant_a, session=None, client_id="app", subject="https://idp.example.com#alice")
    two = make_ctx(tenant_a, session=None, client_id="app", subject="https://idp.example.com#bob")
    assert quotas.caller_key(one) == "subject:https://idp.example.com#alice"
    assert quotas.caller_key(one) != quotas.caller_key(two)


async def test_the_client_comes_from_client_id_or_else_azp(jwt_tenant, idp):
    claims = idp.claims(AUD_A, scope=SCOPES)
    del claims["client_id"]
    alice = AuthClient(token=idp.mint({**claims, "azp": "web-app"}))
    await alice.initialize()
    # The session is the azp client's: the same user through another client does not own it.
    other = AuthClient(token=idp.mint({**claims, "azp": "other-app"}))
    other.session_id, other.version = alice.session_id, alice.version
    assert (await alice.request("tools/list")).status == 200
    assert (await other.request("tools/list")).status == 404


async def test_the_providers_own_scopes_map_to_ours(jwt_tenant, idp):
    await sync_to_async(configure)(
        jwt_tenant,
        {
            "issuer": idp.url, "jwks_uri": idp.jwks_uri, "audience": AUD_A, "scope_claim": "scp",
            "scope_map": {"api://mcp/Tools.Use": TOOLS, "Payroll.Read": "payroll:read"},
        },
    )  # fmt: skip
    theirs = idp.mint(idp.claims(AUD_A, scope="", scp=["api://mcp/Tools.Use"]))
    assert (await call(theirs)).status == 200
    stepped = await call(theirs, "payroll")
    assert stepped.status == 403 and "payroll:read" in stepped.headers["www-authenticate"]
    both = idp.mint(idp.claims(AUD_A, scope="", scp=["api://mcp/Tools.Use", "Payroll.Read"]))
    assert (await call(both, "payroll")).json()["result"]["content"][0]["text"] == "salaries"
    unmapped = idp.mint(idp.claims(AUD_A, scope="", scp=["Something.Else"]))
    assert (await call(unmapped)).status == 403


@pytest.mark.parametrize(
    ("scope_map", "says"),
    [
        (["mcp:tools"], "scope_map must be an object"),
        ({"has space": "mcp:tools"}, "is not a scope"),
        ({"Tools.Use": ""}, "must map to our scopes"),
        ({"Tools.Use": 'mcp:tools "quoted"'}, "is not a list of scopes"),
    ],
)
def test_a_bad_scope_map_is_refused_on_save(tenant_a, scope_map, says):
    identity = {
        "issuer": "https://idp.example.com",
        "jwks_uri": "https://idp.example.com/jwks",
        "audience": "a",
    }
    with pytest.raises(ValidationError, match=says):
        configure(tenant_a, {**identity, "scope_map": scope_map})
