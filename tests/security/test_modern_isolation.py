"""Tenant isolation in the 2026-07-28 era (style §9): server/discover and subscriptions/listen.

alice owns tenant A, bob views tenant A, charlie owns tenant B. A listener of tenant B never hears of
tenant A, discover on B says nothing of A, and a token bound to B opens nothing on A: it gets the
same answer as no token at all.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from oauth2_provider.models import AccessToken

from mcp_app.core.versions import V2026_07_28
from mcp_app.infra import notify
from mcp_app.models import Prompt, Resource, Tool
from tenants.models import Tenant
from tests.oauth.rs_support import issue_token, make_application
from tests.transport.support import BOTH, Stream, call, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

MARK = "TENANT-A-ONLY"
SHARED_URI = "shared://readme"
META = {
    "io.modelcontextprotocol/protocolVersion": V2026_07_28,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def defs(tenant_a, tenant_b) -> dict[str, Any]:
    Tool.objects.create(
        tenant=tenant_a, name="secret_a", description=MARK, handler="template", handler_config={"text": MARK}
    )
    Prompt.objects.create(
        tenant=tenant_a,
        name="prompt_a",
        description=MARK,
        messages=[{"role": "user", "content": {"type": "text", "text": MARK}}],
    )
    Resource.objects.create(tenant=tenant_a, uri=SHARED_URI, name="a", text=MARK)
    Resource.objects.create(tenant=tenant_b, uri=SHARED_URI, name="b", text="B")
    Tool.objects.create(tenant=tenant_b, name="tool_b", handler="template", handler_config={"text": "B"})
    return {"a": tenant_a, "b": tenant_b}


def modern(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> tuple[bytes, dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": {**(params or {}), "_meta": META}}
    headers = {
        "accept": BOTH,
        "content-type": "application/json",
        "mcp-protocol-version": V2026_07_28,
        "mcp-method": method,
    }
    return json.dumps(body).encode(), headers


async def listen(slug: str, wanted: dict[str, Any], token: str | None = None, id: Any = "sub") -> Stream:
    body, headers = modern("subscriptions/listen", {"notifications": wanted}, id=id)
    if token:
        headers["authorization"] = f"Bearer {token}"
    return await open_stream("POST", f"/t/{slug}/mcp", body, headers)


async def acknowledged(stream: Stream) -> dict[str, Any]:
    assert stream.status == 200
    _, message = await stream.next_message()
    assert message["method"] == "notifications/subscriptions/acknowledged"
    return message["params"]


async def test_a_tenant_b_listener_hears_nothing_of_tenant_a_while_a_tenant_a_listener_does(defs):
    wanted = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": [SHARED_URI]}
    stream_a, stream_b = await listen("tenant-a", wanted, id="a-1"), await listen("tenant-b", wanted, id=7)
    try:
        ack_a, ack_b = await acknowledged(stream_a), await acknowledged(stream_b)
        assert ack_a["notifications"] == ack_b["notifications"] == wanted
        assert ack_a["_meta"] == {"io.modelcontextprotocol/subscriptionId": "a-1"}
        assert ack_b["_meta"] == {"io.modelcontextprotocol/subscriptionId": 7}
        tenant_a = defs["a"].id
        await sync_to_async(notify.publish_list_changed)(tenant_a, "tools", 99)
        await sync_to_async(notify.publish_list_changed)(tenant_a, "resources", 99)  # not asked for
        await sync_to_async(notify.publish_resource_updated)(tenant_a, SHARED_URI, 99)
        received = [(await stream_a.next_message())[1] for _ in range(2)]
        tag = {"_meta": {"io.modelcontextprotocol/subscriptionId": "a-1"}}
        assert received == [
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": tag},
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": SHARED_URI, **tag},
            },
        ]
        await asyncio.gather(stream_a.assert_quiet(0.3), stream_b.assert_quiet(0.5))
    finally:
        await asyncio.gather(stream_a.disconnect(), stream_b.disconnect())


async def test_a_listener_is_promised_only_the_uris_its_own_tenant_serves(defs):
    stream = await listen("tenant-b", {"resourceSubscriptions": [SHARED_URI, "file:///only-in-a"]})
    try:
        assert (await acknowledged(stream))["notifications"] == {"resourceSubscriptions": [SHARED_URI]}
    finally:
        await stream.disconnect()


async def test_discover_on_tenant_b_says_nothing_of_tenant_a(defs):
    body, headers = modern("server/discover")
    response = await call("POST", "/t/tenant-b/mcp", body, headers)
    assert response.status == 200
    result = response.json()["result"]
    assert MARK not in response.body.decode()
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "Tenant B"
    assert "prompts" not in result["capabilities"]  # tenant A has prompts; tenant B has none
    assert set(result["capabilities"]) == {"logging", "tools", "resources"}


@pytest.fixture
def oauth_a(defs, alice, bob, charlie) -> dict[str, str]:
    Tenant.objects.filter(pk=defs["a"].pk).update(auth_mode="oauth")
    Tenant.objects.filter(pk=defs["b"].pk).update(auth_mode="oauth")
    app = make_application()
    return {
        "alice": issue_token(alice, defs["a"], app),
        "bob": issue_token(bob, defs["a"], app),
        "charlie": issue_token(charlie, defs["b"], app),
    }


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
async def test_charlies_token_for_tenant_b_opens_nothing_on_tenant_a_exactly_like_no_token(oauth_a, method):
    params = {"notifications": {"toolsListChanged": True}} if method == "subscriptions/listen" else {}
    body, headers = modern(method, params)
    answers = []
    for token in (oauth_a["charlie"], None):
        sent = {**headers, **({"authorization": f"Bearer {token}"} if token else {})}
        response = await call("POST", "/t/tenant-a/mcp", body, sent)
        challenge = response.headers.get("www-authenticate", "")
        answers.append((response.status, challenge.split(",")[0]))
    assert answers[0][0] == 401
    assert answers[0][0] == answers[1][0]


@pytest.mark.parametrize("persona", ["alice", "bob"])
async def test_members_of_tenant_a_discover_and_listen_with_their_tokens(oauth_a, persona):
    body, headers = modern("server/discover")
    headers["authorization"] = f"Bearer {oauth_a[persona]}"
    response = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert response.status == 200
    result = response.json()["result"]
    assert result["cacheScope"] == "private"  # what an OAuth caller sees depends on its token
    stream = await listen("tenant-a", {"toolsListChanged": True}, token=oauth_a[persona])
    try:
        assert (await acknowledged(stream))["notifications"] == {"toolsListChanged": True}
    finally:
        await stream.disconnect()


async def test_a_listener_whose_token_is_revoked_hears_nothing_more_and_its_stream_ends(oauth_a):
    stream = await listen("tenant-a", {"toolsListChanged": True}, token=oauth_a["alice"])
    try:
        await acknowledged(stream)
        tenant_a = await Tenant.objects.aget(slug="tenant-a")
        await sync_to_async(notify.publish_list_changed)(tenant_a.id, "tools", 99)
        assert (await stream.next_message())[1]["method"] == "notifications/tools/list_changed"
        await AccessToken.objects.filter(user__username="alice").adelete()  # revoked: evicted at once
        await sync_to_async(notify.publish_list_changed)(tenant_a.id, "tools", 100)
        rest = await stream.read_to_end()
        assert [event for event in rest if event.get("data")] == []
    finally:
        await stream.disconnect()


TASKS = "io.modelcontextprotocol/tasks"


def task_event(owner: list[Any], task_id: str) -> dict[str, Any]:
    return {"type": "mcp.task_status", "owner": owner, "task": {"taskId": task_id, "status": "completed"}}


async def test_a_listener_hears_the_status_of_its_own_callers_tasks_and_of_nobody_elses(oauth_a, alice, bob):
    tenant_a = await Tenant.objects.aget(slug="tenant-a")
    await Tool.objects.acreate(
        tenant=tenant_a, name="long_a", handler="template", handler_config={"text": "x"}, execution="background"
    )
    client_id = (
        await AccessToken.objects.select_related("application").aget(user=alice)
    ).application.client_id
    wanted = {"toolsListChanged": True, TASKS: True}
    stream_alice = await listen("tenant-a", wanted, token=oauth_a["alice"], id="alice")
    stream_bob = await listen("tenant-a", wanted, token=oauth_a["bob"], id="bob")
    try:
        assert (await acknowledged(stream_alice))["notifications"] == wanted
        assert (await acknowledged(stream_bob))["notifications"] == wanted
        await notify.apublish_tenant(tenant_a.id, task_event([alice.id, client_id, ""], "alices"))
        await notify.apublish_tenant(tenant_a.id, task_event([bob.id, client_id, ""], "bobs"))
        await notify.apublish_tenant(tenant_a.id, task_event([alice.id, "another-client", ""], "elsewhere"))
        heard_alice, heard_bob = (await stream_alice.next_message())[1], (await stream_bob.next_message())[1]
        assert heard_alice == {
            "jsonrpc": "2.0",
            "method": "notifications/tasks",
            "params": {
                "taskId": "alices",
                "status": "completed",
                "_meta": {"io.modelcontextprotocol/subscriptionId": "alice"},
            },
        }
        assert heard_bob["params"]["taskId"] == "bobs"
        await asyncio.gather(stream_alice.assert_quiet(0.3), stream_bob.assert_quiet(0.3))
    finally:
        await asyncio.gather(stream_alice.disconnect(), stream_bob.disconnect())


async def test_task_statuses_are_not_promised_to_an_anonymous_listener_or_where_no_tool_becomes_a_task(defs):
    await Tool.objects.acreate(
        tenant=defs["a"],
        name="long_a",
        handler="template",
        handler_config={"text": "x"},
        execution="background",
    )
    for slug in ("tenant-a", "tenant-b"):  # a: anonymous caller; b: no background tool either
        stream = await listen(slug, {"toolsListChanged": True, TASKS: True})
        try:
            assert (await acknowledged(stream))["notifications"] == {"toolsListChanged": True}
        finally:
            await stream.disconnect()


async def test_a_listen_filter_whose_tasks_opt_in_is_not_a_boolean_is_invalid_params(defs):
    body, headers = modern("subscriptions/listen", {"notifications": {TASKS: "yes"}})
    response = await call("POST", "/t/tenant-a/mcp", body, headers)
    assert response.status == 400
    assert response.json()["error"]["code"] == -32602
