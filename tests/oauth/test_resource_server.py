"""Bearer tokens at the MCP endpoints of oauth tenants (checklist §4.2, §4.6, §4.7: AU-13, AU-30, AU-40..46, SEC-03).

tenant_a and tenant_b are switched to `oauth` here; alice owns A, bob views A, charlie owns B.
Tokens are made directly with django-oauth-toolkit's models, as the authorization server stores them.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from oauth2_provider.models import get_access_token_model

from mcp_app import catalog
from mcp_app.infra import redis_client
from mcp_app.models import Prompt, Tool
from mcp_app.oauth import tokens
from mcp_app.streams import sessions
from tenants.models import Membership, Role, Tenant
from tests.oauth.rs_support import ALL_SCOPES, AuthClient, issue_token, make_application
from tests.transport.conftest import clean_transport_state  # noqa: F401 - autouse fixture
from tests.transport.support import BOTH, call

pytestmark = pytest.mark.django_db(transaction=True)

PRM_A = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/t/tenant-a/mcp"
PRM_B = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/t/tenant-b/mcp"
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(autouse=True)
def _fresh_token_cache():
    tokens.reset()
    yield
    tokens.reset()


@pytest.fixture
def secured(tenant_a, tenant_b):
    """Both personas' tenants in oauth mode; tenant A has an open tool and one needing payroll:read."""
    Tenant.objects.filter(pk__in=[tenant_a.pk, tenant_b.pk]).update(auth_mode="oauth")
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
    Prompt.objects.create(
        tenant=tenant_a,
        name="greeting",
        arguments=[{"name": "who", "completions": ["world", "team"]}],
        messages=[{"role": "user", "content": {"type": "text", "text": "Hello {{ who }}"}}],
    )
    catalog.clear_caches()
    return tenant_a


@pytest.fixture
def app_one(db):
    return make_application("Client one")


@pytest.fixture
def app_two(db):
    return make_application("Client two")


@pytest.fixture
def alice_token(secured, alice, app_one) -> str:
    return issue_token(alice, secured, app_one)


async def connected(token: str, slug: str = "tenant-a", version: str = "2025-06-18") -> AuthClient:
    """A client that has initialized a session with this token."""
    client = AuthClient(slug, token=token)
    await client.initialize(version)
    return client


def challenge(
    prm: str, error: str | None = None, description: str | None = None, scope: str = ALL_SCOPES
) -> str:
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    parts.append(f'scope="{scope}"')
    parts.append(f'resource_metadata="{prm}"')
    return "Bearer " + ",".join(parts)


# --- 401: no token, bad token (AU-13, AU-42, AU-62) ------------------------------------------------


async def test_au13_au62_a_request_without_a_token_gets_401_naming_the_metadata_document(secured):
    response = await AuthClient().request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A)
    assert response.headers["content-type"].startswith("text/plain")
    assert b"Authorization: Bearer" in response.body and PRM_A.encode() in response.body


async def test_au13_initialize_without_a_token_gets_401_too(secured):
    client = AuthClient()
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert response.status == 401
    assert "mcp-session-id" not in response.headers
    assert response.headers["www-authenticate"] == challenge(PRM_A)


async def test_au42_an_unknown_token_gets_401_invalid_token(secured):
    response = await AuthClient(token="not-a-token-we-issued").request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.UNKNOWN)
    assert tokens.UNKNOWN.encode() in response.body


@pytest.mark.parametrize("header", ["Bearer", "Bearer two words", "Bearer tok\u00e9n", "Bearer a, Bearer b"])
async def test_au42_a_malformed_bearer_header_gets_401_invalid_token(secured, header):
    response = await AuthClient().request("tools/list", headers={"authorization": header})
    assert response.status == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_au13_another_authorization_scheme_counts_as_no_token(secured):
    response = await AuthClient().request("tools/list", headers={"authorization": "Basic YWxpY2U6cHc="})
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A)


async def test_au42_an_expired_token_gets_401_invalid_token(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, expires_in=-1)
    response = await AuthClient(token=token).request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.EXPIRED)


async def test_au42_a_cached_token_is_refused_once_it_expires(secured, alice, app_one, monkeypatch):
    token = await sync_to_async(issue_token)(alice, secured, app_one, expires_in=60)
    client = await connected(token)
    assert (await client.request("tools/list")).status == 200
    # Expiry is checked on every use, even while the lookup is cached.
    later = tokens._wallclock() + 61
    monkeypatch.setattr(tokens, "_wallclock", lambda: later)
    response = await client.request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.EXPIRED)


# --- revocation and the cache -------------------------------------------------------------------


async def test_au42_a_token_revoked_in_this_process_is_refused_at_once(secured, alice_token):
    client = await connected(alice_token)
    assert (await client.request("tools/list")).status == 200
    # DOT's revoke() deletes the row; the delete signal drops the cached lookup in this process.
    await sync_to_async(
        lambda: get_access_token_model().objects.get(token_checksum=tokens.checksum(alice_token)).revoke()
    )()
    response = await client.request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.UNKNOWN)


async def test_au42_a_token_revoked_by_another_process_is_refused_once_the_cache_window_ends(
    secured, alice_token, monkeypatch, settings
):
    settings.MCP_TOKEN_CACHE_SECONDS = 5
    now = [1000.0]
    monkeypatch.setattr(tokens, "_clock", lambda: now[0])
    client = await connected(alice_token)
    assert (await client.request("tools/list")).status == 200

    def delete_without_signals() -> None:  # what this process sees when another one revokes
        table = get_access_token_model()._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE token_checksum = %s", [tokens.checksum(alice_token)])

    await sync_to_async(delete_without_signals)()
    now[0] += 4.9
    assert (await client.request("tools/list")).status == 200  # still within MCP_TOKEN_CACHE_SECONDS
    now[0] += 0.2
    response = await client.request("tools/list")
    assert response.status == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_token_checks_cost_one_lookup_then_hit_the_cache(secured, alice_token, monkeypatch, settings):
    settings.MCP_TOKEN_CACHE_SECONDS = 5  # as with Redis; without it nothing is cached (AMB-296)
    fetches = []
    real_fetch = tokens._fetch

    def counting_fetch(key: str, tenant_id: int) -> tokens.TokenRecord:
        fetches.append(key)
        return real_fetch(key, tenant_id)

    monkeypatch.setattr(tokens, "_fetch", counting_fetch)
    client = AuthClient(token=alice_token)
    await client.initialize()
    for _ in range(5):
        assert (await client.request("tools/list")).status == 200
    assert fetches == [tokens.checksum(alice_token)]  # never the token itself (AU-47)
    # Refused tokens are cached too, so a client looping on a bad token costs one lookup.
    bad = AuthClient(token="made-up-token")
    for _ in range(3):
        assert (await bad.request("tools/list")).status == 401
    assert fetches.count(tokens.checksum("made-up-token")) == 1


def test_a_token_lookup_is_one_query(secured, alice_token, django_assert_num_queries):
    with django_assert_num_queries(1):
        record = tokens._fetch(tokens.checksum(alice_token), secured.pk)
    assert record.found and record.member
    assert record.scopes == frozenset(ALL_SCOPES.split())


# --- audience (AU-41, AU-44) -----------------------------------------------------------------------


async def test_au41_tenant_a_token_is_refused_at_tenant_b(secured, alice, tenant_b, app_one):
    # alice is a member of both tenants: only the audience can refuse it.
    await sync_to_async(Membership.objects.create)(user=alice, tenant=tenant_b, role=Role.VIEWER)
    token = await sync_to_async(issue_token)(alice, secured, app_one)
    response = await AuthClient("tenant-b", token=token).request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_B, "invalid_token", tokens.WRONG_AUDIENCE)
    assert (await (await connected(token)).request("tools/list")).status == 200


async def test_au41_a_token_without_resource_is_never_accepted(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, resource=[])
    response = await AuthClient(token=token).request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.WRONG_AUDIENCE)


async def test_au41_a_token_for_several_resources_is_refused(secured, alice, app_one):
    resources_ = ["http://127.0.0.1:8000/t/tenant-a/mcp", "http://127.0.0.1:8000/t/tenant-b/mcp"]
    token = await sync_to_async(issue_token)(alice, secured, app_one, resource=resources_)
    assert (await AuthClient(token=token).request("tools/list")).status == 401


async def test_au41_a_token_for_a_parent_url_is_refused(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, resource=["http://127.0.0.1:8000"])
    assert (await AuthClient(token=token).request("tools/list")).status == 401


async def test_au35_the_resource_matches_case_insensitively_in_scheme_and_host(secured, alice, app_one):
    token = await sync_to_async(issue_token)(
        alice, secured, app_one, resource=["HTTP://127.0.0.1:8000/t/tenant-a/mcp/"]
    )
    assert (await (await connected(token)).request("tools/list")).status == 200


# --- membership ------------------------------------------------------------------------------------


async def test_au44_a_token_of_a_user_who_is_not_a_member_is_refused(secured, charlie, app_one):
    token = await sync_to_async(issue_token)(charlie, secured, app_one)  # bound to A, charlie is B's
    response = await AuthClient(token=token).request("tools/list")
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.NOT_MEMBER)


async def test_au44_removing_the_membership_refuses_the_token_at_once(secured, bob, app_one):
    token = await sync_to_async(issue_token)(bob, secured, app_one)
    client = await connected(token)
    assert (await client.request("tools/list")).status == 200
    await sync_to_async(Membership.objects.filter(user=bob).delete)()
    assert (await client.request("tools/list")).status == 401


async def test_au44_a_deactivated_user_is_refused(secured, bob, app_one):
    token = await sync_to_async(issue_token)(bob, secured, app_one)
    bob.is_active = False
    await sync_to_async(bob.save)()
    assert (await AuthClient(token=token).request("tools/list")).status == 401


# --- query-string tokens (AU-30) -------------------------------------------------------------------


async def test_au30_a_token_in_the_query_string_is_refused_with_400(secured, alice_token):
    for headers in ({}, {"authorization": f"Bearer {alice_token}"}):
        response = await call(
            "POST",
            f"/t/tenant-a/mcp?access_token={alice_token}",
            json.dumps(TOOLS_LIST).encode(),
            {"accept": BOTH, "content-type": "application/json", **headers},
        )
        assert response.status == 400
        assert response.headers["www-authenticate"] == challenge(
            PRM_A,
            "invalid_request",
            "Access tokens are not accepted in the query string; send Authorization: Bearer.",
        )
        assert alice_token.encode() not in response.body


# --- scopes (AU-43, 2025-11-25 step-up) ----------------------------------------------------------


async def test_au43_tools_list_without_mcp_tools_gets_403_insufficient_scope(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:prompts")
    client = await connected(token)
    response = await client.request("tools/list")
    assert response.status == 403
    assert response.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope",'
        'error_description="This request needs the scope(s) mcp:tools, which the access token lacks.",'
        f'scope="mcp:prompts mcp:tools",resource_metadata="{PRM_A}"'
    )
    # The same token may use what it was granted.
    assert (await client.request("prompts/list")).status == 200


async def test_au43_calling_a_tool_needs_its_required_scope(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:tools")
    client = await connected(token)
    listed = await client.request("tools/list")
    # tools/list shows every tool, so a client can discover what to step up for.
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"echo", "payroll"}
    response = await client.request("tools/call", {"name": "payroll", "arguments": {}})
    assert response.status == 403
    assert response.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope",'
        "error_description=\"Calling tool 'payroll' needs the scope(s) payroll:read, which the access token lacks.\","
        f'scope="mcp:tools payroll:read",resource_metadata="{PRM_A}"'
    )
    assert (
        await client.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    ).status == 200

    stepped_up = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:tools payroll:read")
    result = await (await connected(stepped_up)).request("tools/call", {"name": "payroll", "arguments": {}})
    assert result.status == 200
    assert result.json()["result"]["content"] == [{"type": "text", "text": "salaries"}]


async def test_au43_a_batch_with_one_message_lacking_scope_is_refused_whole(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:tools")
    client = AuthClient(token=token)
    await client.initialize("2025-03-26")  # batches exist up to 2025-03-26
    batch = [TOOLS_LIST, {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}]
    response = await client.post(batch)
    assert response.status == 403
    assert 'scope="mcp:prompts mcp:tools"' in response.headers["www-authenticate"]


async def test_au43_completions_of_a_prompt_need_mcp_prompts(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:tools")
    params = {"ref": {"type": "ref/prompt", "name": "greeting"}, "argument": {"name": "who", "value": "w"}}
    response = await (await connected(token)).request("completion/complete", params)
    assert response.status == 403
    assert 'scope="mcp:prompts mcp:tools"' in response.headers["www-authenticate"]


async def test_ping_and_notifications_need_only_a_valid_token(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="")
    client = AuthClient(token=token)
    await client.initialize()
    assert (await client.request("ping")).json()["result"] == {}


# --- sessions belong to a user and a client (SEC-03, AMB-5) ----------------------------------------


async def test_the_session_remembers_the_user_and_client_of_the_token(secured, alice, alice_token, app_one):
    client = AuthClient(token=alice_token)
    await client.initialize()
    state = await sessions.get_store().peek(client.session_id)
    assert (state.user_id, state.client_id) == (alice.pk, app_one.client_id)


async def test_sec03_a_session_id_used_with_another_users_token_gets_404(secured, alice_token, bob, app_one):
    owner = AuthClient(token=alice_token)
    await owner.initialize()
    intruder = AuthClient(token=await sync_to_async(issue_token)(bob, secured, app_one))
    intruder.session_id, intruder.version = owner.session_id, owner.version
    response = await intruder.request("tools/list")
    assert response.status == 404
    assert (await owner.request("tools/list")).status == 200


async def test_sec03_a_session_id_used_with_another_clients_token_gets_404(
    secured, alice, alice_token, app_two
):
    owner = AuthClient(token=alice_token)
    await owner.initialize()
    other_client = AuthClient(token=await sync_to_async(issue_token)(alice, secured, app_two))
    other_client.session_id, other_client.version = owner.session_id, owner.version
    assert (await other_client.request("tools/list")).status == 404


async def test_sec03_a_new_token_of_the_same_user_and_client_keeps_the_session(
    secured, alice, alice_token, app_one
):
    client = AuthClient(token=alice_token)
    await client.initialize()
    client.token = await sync_to_async(issue_token)(alice, secured, app_one)  # e.g. after a refresh
    assert (await client.request("tools/list")).status == 200


# --- every request needs the token (AU-46) ------------------------------------------------------


async def test_ht41_a_session_id_is_no_credential_a_post_without_the_token_gets_401(secured, alice_token):
    client = AuthClient(token=alice_token)
    await client.initialize()
    client.token = None  # the same session, no Authorization header
    response = await client.request("tools/list")
    assert response.status == 401 and response.headers["www-authenticate"] == challenge(PRM_A)


async def test_au46_get_stream_and_delete_need_the_token(secured, alice_token, bob, app_one):
    client = AuthClient(token=alice_token)
    await client.initialize()
    session = {"mcp-session-id": client.session_id, "mcp-protocol-version": client.version}
    get = await call("GET", "/t/tenant-a/mcp", headers={"accept": "text/event-stream", **session})
    assert get.status == 401 and get.headers["www-authenticate"] == challenge(PRM_A)
    delete = await call("DELETE", "/t/tenant-a/mcp", headers=session)
    assert delete.status == 401 and delete.headers["www-authenticate"] == challenge(PRM_A)
    bob_token = await sync_to_async(issue_token)(bob, secured, app_one)
    foreign = await call(
        "DELETE", "/t/tenant-a/mcp", headers={**session, "authorization": f"Bearer {bob_token}"}
    )
    assert foreign.status == 404
    own = await call(
        "DELETE", "/t/tenant-a/mcp", headers={**session, "authorization": f"Bearer {alice_token}"}
    )
    assert own.status == 204


async def test_au46_legacy_endpoints_need_the_token(secured):
    stream = await call("GET", "/t/tenant-a/sse", headers={"accept": "text/event-stream"})
    assert stream.status == 401 and stream.headers["www-authenticate"] == challenge(PRM_A)
    post = await call(
        "POST",
        "/t/tenant-a/messages?session_id=L.abc",
        json.dumps(TOOLS_LIST).encode(),
        {"content-type": "application/json"},
    )
    assert post.status == 401 and post.headers["www-authenticate"] == challenge(PRM_A)


async def test_au13_the_challenge_is_readable_by_browser_clients(secured):
    origin = "http://127.0.0.1:8000"
    response = await AuthClient().request("tools/list", headers={"origin": origin})
    assert response.status == 401
    assert "www-authenticate" in response.headers["access-control-expose-headers"].lower()


# --- public tenants and the happy path ---------------------------------------------------------


async def test_amb30_a_public_tenant_ignores_authorization(tenant_b):
    for token in (None, "garbage"):
        client = AuthClient("tenant-b", token=token)
        await client.initialize()
        assert (await client.request("tools/list")).status == 200
    query = await call(
        "POST",
        "/t/tenant-b/mcp?access_token=whatever",
        json.dumps(TOOLS_LIST).encode(),
        {"accept": BOTH, "content-type": "application/json", **client.session_headers()},
    )
    assert query.status == 200


async def test_au40_a_member_with_a_valid_token_uses_the_endpoint(secured, alice_token):
    client = AuthClient(token=alice_token)
    await client.initialize()
    response = await client.request("tools/call", {"name": "echo", "arguments": {"message": "hello"}})
    assert response.status == 200
    assert response.json()["result"]["content"][0]["text"] == "hello"


async def test_au43_a_scope_added_to_a_tool_in_the_admin_applies_to_the_next_call(secured, alice, app_one):
    token = await sync_to_async(issue_token)(alice, secured, app_one, scope="mcp:tools")
    client = await connected(token)
    call_echo = {"name": "echo", "arguments": {"message": "hi"}}
    assert (await client.request("tools/call", call_echo)).status == 200

    def require_scope() -> None:
        tool = Tool.objects.get(tenant=secured, name="echo")
        tool.required_scope = "echo:use"
        tool.full_clean()
        tool.save()

    await sync_to_async(require_scope)()
    response = await client.request("tools/call", call_echo)
    assert response.status == 403
    assert 'scope="echo:use mcp:tools"' in response.headers["www-authenticate"]


def test_a_required_scope_must_be_one_scope_token(secured):
    tool = Tool.objects.get(tenant=secured, name="echo")
    for bad in ("two scopes", 'quo"te', "back\\slash", "caf\u00e9"):
        tool.required_scope = bad
        with pytest.raises(ValidationError) as excinfo:
            tool.full_clean()
        assert "required_scope" in excinfo.value.message_dict
    tool.required_scope = "billing:write"
    tool.full_clean()


# --- revocations reach every process at once (Redis pub/sub), not after the cache TTL -------------


@pytest.fixture
async def subscriber(settings):
    """A long cache, so only an eviction message can explain a refusal; the subscriber stops after."""
    settings.MCP_TOKEN_CACHE_SECONDS = 3600
    settings.MCP_TOKEN_EVICTION_SUBSCRIBER = True
    tokens.reset()
    yield
    await tokens.stop_subscriber()
    tokens.reset()


def publish(message: dict) -> None:
    """What another process's signal handler sends after its transaction commits (infra/cache.py)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.publish(redis_client.channel(tokens.EVICT_CHANNEL), json.dumps({"cache": "tokens", **message}))
    finally:
        client.close()


async def eventually_refused(client, seconds: float = 2.0):
    deadline = time.monotonic() + seconds
    while True:
        response = await client.request("tools/list")
        if response.status != 200 or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.02)


def sql(statement: str, params: list) -> None:
    """Change a row without Django's signals: what this process sees when another process changes it."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


@pytest.mark.services
@pytest.mark.usefixtures("subscriber")
async def test_au42_a_token_revoked_by_another_process_is_refused_at_once_despite_a_long_cache(
    secured, alice_token
):
    client = await connected(alice_token)
    assert (await client.request("tools/list")).status == 200
    assert await tokens.listening()  # the subscriber, started by the first check, has subscribed
    table = get_access_token_model()._meta.db_table
    key = tokens.checksum(alice_token)
    await sync_to_async(sql)(f"DELETE FROM {table} WHERE token_checksum = %s", [key])
    assert (await client.request("tools/list")).status == 200  # still cached: nothing told us yet
    publish({"key": key})
    response = await eventually_refused(client)
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.UNKNOWN)


@pytest.mark.services
@pytest.mark.usefixtures("subscriber")
async def test_au44_a_membership_removed_by_another_process_refuses_the_users_tokens_at_once(
    secured, alice, alice_token
):
    client = await connected(alice_token)
    assert (await client.request("tools/list")).status == 200
    assert await tokens.listening()
    await sync_to_async(sql)(
        f"DELETE FROM {Membership._meta.db_table} WHERE user_id = %s AND tenant_id = %s",
        [alice.pk, secured.pk],
    )
    publish({"field": "user_id", "value": alice.pk})
    response = await eventually_refused(client)
    assert response.status == 401
    assert response.headers["www-authenticate"] == challenge(PRM_A, "invalid_token", tokens.NOT_MEMBER)


@pytest.mark.services
@pytest.mark.usefixtures("subscriber")
def test_revoking_a_token_publishes_its_checksum_after_the_commit(secured, alice_token):
    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub()
    try:
        pubsub.subscribe(redis_client.channel(tokens.EVICT_CHANNEL))
        assert pubsub.get_message(timeout=2)["type"] == "subscribe"
        token = get_access_token_model().objects.get(token_checksum=tokens.checksum(alice_token))
        with transaction.atomic():
            token.revoke()
            # Not yet: another process reading the row now would still find it and cache it again.
            assert pubsub.get_message(timeout=0.2) is None
        message = pubsub.get_message(timeout=2)
        assert json.loads(message["data"]) == {"cache": "tokens", "key": tokens.checksum(alice_token)}
    finally:
        pubsub.close()
        client.close()


@pytest.mark.services
@pytest.mark.usefixtures("subscriber")
async def test_a_garbled_eviction_message_is_ignored_and_the_subscriber_keeps_working(secured, alice_token):
    client = await connected(alice_token)
    assert (await client.request("tools/list")).status == 200
    assert await tokens.listening()
    publish({"key": 42})
    client_redis = redis.Redis.from_url(settings.REDIS_URL)
    client_redis.publish(redis_client.channel(tokens.EVICT_CHANNEL), b"\xff not json")
    client_redis.close()
    assert (await client.request("tools/list")).status == 200
    table = get_access_token_model()._meta.db_table
    key = tokens.checksum(alice_token)
    await sync_to_async(sql)(f"DELETE FROM {table} WHERE token_checksum = %s", [key])
    publish({"key": key})
    assert (await eventually_refused(client)).status == 401


# --- the member's role in a policy (AMB-347) -------------------------------------------------------


async def test_a_policy_on_the_members_role_applies_to_their_token_and_follows_a_role_change_at_once(
    secured, alice, bob, app_one
):
    def deny_viewers() -> None:
        from mcp_app.models import Policy  # noqa: PLC0415 - this test's own model

        row = Policy(
            tenant=secured, name="viewers-look-only", condition="caller.role == 'viewer'", applies_to="tools"
        )
        row.full_clean()
        row.save()

    await sync_to_async(deny_viewers)()
    owner = await connected(await sync_to_async(issue_token)(alice, secured, app_one))
    viewer = await connected(await sync_to_async(issue_token)(bob, secured, app_one))
    listed = {
        "owner": (await owner.request("tools/list")).json()["result"]["tools"],
        "viewer": (await viewer.request("tools/list")).json()["result"]["tools"],
    }
    assert listed["owner"] and listed["viewer"] == []

    def promote() -> None:  # as the admin saves a membership: its change evicts the cached tokens
        membership = Membership.objects.get(user=bob, tenant=secured)
        membership.role = Role.EDITOR
        membership.save()

    await sync_to_async(promote)()
    assert (await viewer.request("tools/list")).json()["result"]["tools"] == listed["owner"]
