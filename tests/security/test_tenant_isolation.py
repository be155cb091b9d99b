"""Tenant isolation (style §9): nothing of tenant A reaches tenant B through its URL, session, streams or admin.

alice owns tenant A, bob views tenant A, charlie owns tenant B. Every one of tenant A's definitions
carries the marker MARK, so any answer given to tenant B can be searched for a leak; another
tenant's object must get the same answer as a missing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse
from django.utils import timezone

from mcp_app.infra import notify
from mcp_app.models import McpSession, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, RESOURCE_NOT_FOUND
from tenants.models import Membership
from tests.transport.support import BOTH, Client, Response, Stream, call, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

MARK = "TENANT-A-ONLY"
SHARED_URI = "shared://readme"  # both tenants define a resource with this URI


def _tool(tenant, name: str, text: str) -> Tool:
    return Tool.objects.create(
        tenant=tenant,
        name=name,
        description=text,
        input_schema={"type": "object", "properties": {}},
        handler="template",
        handler_config={"text": text},
    )


@pytest.fixture
def defs_a(tenant_a) -> dict[str, Any]:
    """Tenant A's definitions, each carrying MARK."""
    return {
        "tools": [_tool(tenant_a, "a_tool", f"{MARK} tool"), _tool(tenant_a, "a_tool_two", f"{MARK} two")],
        "prompt": Prompt.objects.create(
            tenant=tenant_a,
            name="a_prompt",
            description=f"{MARK} prompt",
            arguments=[{"name": "topic", "required": True, "completions": [f"{MARK}-topic"]}],
            messages=[{"role": "user", "content": {"type": "text", "text": f"{MARK} {{{{ topic }}}}"}}],
        ),
        "resource": Resource.objects.create(tenant=tenant_a, uri="a://private", name="private", text=MARK),
        "shared": Resource.objects.create(tenant=tenant_a, uri=SHARED_URI, name="readme-a", text=MARK),
        "template": ResourceTemplate.objects.create(
            tenant=tenant_a,
            uri_template="a://items/{item_id}",
            name="a-items",
            description=f"{MARK} template",
            handler="template",
            handler_config={"text": f"{MARK} item {{{{ item_id }}}}"},
            completions={"item_id": [f"{MARK}-item"]},
        ),
    }


@pytest.fixture
def defs_b(tenant_b) -> dict[str, Any]:
    """Tenant B's own definitions, so its lists are not trivially empty."""
    return {
        "tools": [_tool(tenant_b, "b_tool", "tenant B tool"), _tool(tenant_b, "b_tool_two", "tenant B two")],
        "shared": Resource.objects.create(tenant=tenant_b, uri=SHARED_URI, name="readme-b", text="B readme"),
    }


async def session_on(slug: str) -> Client:
    client = Client(slug)
    await client.initialize()
    return client


def assert_no_leak(response: Response) -> None:
    assert MARK not in response.body.decode("utf-8", "replace")


def error_code(response: Response) -> int:
    assert response.status == 200, response.body
    return response.json()["error"]["code"]


async def get_stream(client: Client, slug: str | None = None) -> Stream:
    headers = {"accept": "text/event-stream", **client.session_headers()}
    return await open_stream("GET", f"/t/{slug or client.slug}/mcp", b"", headers)


async def close(*streams: Stream) -> None:
    for stream in streams:
        with contextlib.suppress(Exception):
            await stream.disconnect()


# --- sessions ---------------------------------------------------------------------------------------


async def test_tenant_a_session_id_on_tenant_b_url_is_404_for_post_get_and_delete(defs_a, defs_b):
    """HT-39, AMB-5: a session belongs to its tenant; elsewhere it looks unknown, and survives the attempt."""
    alice = await session_on("tenant-a")
    headers = alice.session_headers()
    post = await call(
        "POST",
        "/t/tenant-b/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
        {"accept": BOTH, "content-type": "application/json", **headers},
    )
    get = await call("GET", "/t/tenant-b/mcp", headers={"accept": "text/event-stream", **headers})
    delete = await call("DELETE", "/t/tenant-b/mcp", headers=headers)
    unknown = await call("DELETE", "/t/tenant-b/mcp", headers={**headers, "mcp-session-id": "x" * 43})
    for response in (post, get, delete):
        assert response.status == 404
        assert response.json()["error"]["code"] == INVALID_REQUEST
        assert response.json()["error"]["message"] == unknown.json()["error"]["message"]
        assert_no_leak(response)
    still = await alice.request("tools/list")
    assert [t["name"] for t in still.json()["result"]["tools"]] == ["a_tool", "a_tool_two"]


async def test_tenant_a_legacy_session_on_tenant_b_messages_url_is_404(defs_a, defs_b):
    stream = await open_stream("GET", "/t/tenant-a/sse", b"", {"accept": "text/event-stream"})
    try:
        endpoint = (await stream.next_event())["data"]
        assert endpoint.startswith("/t/tenant-a/messages?session_id=")
        foreign = endpoint.replace("/t/tenant-a/", "/t/tenant-b/")
        response = await call(
            "POST",
            foreign,
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
            {"content-type": "application/json"},
        )
        assert response.status == 404
        await stream.assert_quiet(0.2)  # nothing was answered on tenant A's stream either
    finally:
        await close(stream)


# --- lists and reads through tenant B ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "key", "names"),
    [
        ("tools/list", "tools", ["b_tool", "b_tool_two"]),
        ("prompts/list", "prompts", []),
        ("resources/list", "resources", ["readme-b"]),
        ("resources/templates/list", "resourceTemplates", []),
    ],
)
async def test_tenant_b_lists_show_none_of_tenant_a_definitions(defs_a, defs_b, method, key, names):
    charlie = await session_on("tenant-b")
    response = await charlie.request(method)
    assert [item["name"] for item in response.json()["result"][key]] == names
    assert_no_leak(response)


async def test_tenant_b_reading_tenant_a_resource_uri_gets_resource_not_found_like_a_missing_one(
    defs_a, defs_b
):
    charlie = await session_on("tenant-b")
    foreign = await charlie.request("resources/read", {"uri": "a://private"})
    missing = await charlie.request("resources/read", {"uri": "a://nothing"})
    assert error_code(foreign) == error_code(missing) == RESOURCE_NOT_FOUND
    assert foreign.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "nothing", "private"
    )
    assert_no_leak(foreign)


async def test_tenant_b_reading_through_tenant_a_template_gets_resource_not_found(defs_a, defs_b):
    charlie = await session_on("tenant-b")
    response = await charlie.request("resources/read", {"uri": "a://items/7"})
    assert error_code(response) == RESOURCE_NOT_FOUND
    assert_no_leak(response)


async def test_tenant_b_reading_a_uri_both_tenants_define_gets_only_its_own_text(defs_a, defs_b):
    charlie = await session_on("tenant-b")
    response = await charlie.request("resources/read", {"uri": SHARED_URI})
    assert response.json()["result"]["contents"][0]["text"] == "B readme"
    assert_no_leak(response)


async def test_tenant_b_cannot_subscribe_to_tenant_a_resource(defs_a, defs_b):
    """AMB-21: subscribing to a URI the tenant does not serve is -32002."""
    charlie = await session_on("tenant-b")
    response = await charlie.request("resources/subscribe", {"uri": "a://private"})
    assert error_code(response) == RESOURCE_NOT_FOUND


async def test_tenant_b_getting_tenant_a_prompt_is_invalid_params_like_an_unknown_one(defs_a, defs_b):
    charlie = await session_on("tenant-b")
    foreign = await charlie.request("prompts/get", {"name": "a_prompt", "arguments": {"topic": "x"}})
    missing = await charlie.request("prompts/get", {"name": "zz_prompt", "arguments": {"topic": "x"}})
    assert error_code(foreign) == error_code(missing) == INVALID_PARAMS
    assert foreign.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "zz_prompt", "a_prompt"
    )
    assert_no_leak(foreign)


async def test_tenant_b_calling_tenant_a_tool_is_invalid_params_like_an_unknown_one(defs_a, defs_b):
    charlie = await session_on("tenant-b")
    foreign = await charlie.request("tools/call", {"name": "a_tool", "arguments": {}})
    missing = await charlie.request("tools/call", {"name": "zz_tool", "arguments": {}})
    assert error_code(foreign) == error_code(missing) == INVALID_PARAMS
    assert foreign.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "zz_tool", "a_tool"
    )
    assert_no_leak(foreign)


@pytest.mark.parametrize(
    ("ref", "argument"),
    [
        ({"type": "ref/prompt", "name": "a_prompt"}, "topic"),
        ({"type": "ref/resource", "uri": "a://items/{item_id}"}, "item_id"),
    ],
)
async def test_tenant_b_completing_tenant_a_prompt_or_template_is_invalid_params(
    defs_a, defs_b, ref, argument
):
    """CP-05: completion suggestions are scoped to the tenant."""
    charlie = await session_on("tenant-b")
    response = await charlie.request(
        "completion/complete", {"ref": ref, "argument": {"name": argument, "value": ""}}
    )
    assert error_code(response) == INVALID_PARAMS
    assert_no_leak(response)


async def test_tenant_a_tools_list_cursor_used_on_tenant_b_is_invalid_params(defs_a, defs_b, settings):
    """PG-05, PG-06: a cursor is bound to the tenant that issued it."""
    settings.MCP_PAGE_SIZE = 1
    alice = await session_on("tenant-a")
    cursor = (await alice.request("tools/list")).json()["result"]["nextCursor"]
    charlie = await session_on("tenant-b")
    response = await charlie.request("tools/list", {"cursor": cursor})
    assert error_code(response) == INVALID_PARAMS
    assert_no_leak(response)
    own = await alice.request("tools/list", {"cursor": cursor})
    assert [t["name"] for t in own.json()["result"]["tools"]] == ["a_tool_two"]


# --- streams ----------------------------------------------------------------------------------------


async def test_tenant_b_stream_does_not_get_tenant_a_list_changed_while_tenant_a_stream_does(defs_a, defs_b):
    alice, charlie = await session_on("tenant-a"), await session_on("tenant-b")
    stream_a, stream_b = await get_stream(alice), await get_stream(charlie)
    try:
        assert stream_a.status == stream_b.status == 200
        await asyncio.gather(
            stream_a.assert_quiet(0.1), stream_b.assert_quiet(0.1)
        )  # both joined their groups
        tenant_a_id = defs_a["resource"].tenant_id
        for kind in ("tools", "prompts", "resources"):
            await sync_to_async(notify.publish_list_changed)(tenant_a_id, kind, 99)
        received = [(await stream_a.next_message())[1]["method"] for _ in range(3)]
        assert received == [
            f"notifications/{kind}/list_changed" for kind in ("tools", "prompts", "resources")
        ]
        await stream_b.assert_quiet(0.5)
    finally:
        await close(stream_a, stream_b)


async def test_tenant_b_stream_subscribed_to_the_same_uri_does_not_get_tenant_a_resource_updated(
    defs_a, defs_b
):
    alice, charlie = await session_on("tenant-a"), await session_on("tenant-b")
    for client in (alice, charlie):
        subscribed = await client.request("resources/subscribe", {"uri": SHARED_URI})
        assert subscribed.json()["result"] == {}
    stream_a, stream_b = await get_stream(alice), await get_stream(charlie)
    try:
        await asyncio.gather(stream_a.assert_quiet(0.1), stream_b.assert_quiet(0.1))
        await sync_to_async(notify.publish_resource_updated)(defs_a["shared"].tenant_id, SHARED_URI, 99)
        _, message = await stream_a.next_message()
        assert message == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": SHARED_URI},
        }
        await stream_b.assert_quiet(0.5)
    finally:
        await close(stream_a, stream_b)


async def test_tenant_a_session_cannot_open_a_stream_on_tenant_b_url(defs_a, defs_b):
    alice = await session_on("tenant-a")
    response = await call(
        "GET", "/t/tenant-b/mcp", headers={"accept": "text/event-stream", **alice.session_headers()}
    )
    assert response.status == 404
    stream = await get_stream(alice)  # and its own stream still opens: the attempt took no slot
    try:
        assert stream.status == 200
    finally:
        await close(stream)


# --- admin ------------------------------------------------------------------------------------------


@pytest.fixture
def rows_a(defs_a, tenant_a, alice, bob) -> dict[str, Any]:
    """One row of each admin model in tenant A (a database session row too)."""
    session = McpSession.objects.create(
        id="tenant-a-session-0001", tenant=tenant_a, state={"note": MARK}, last_seen_at=timezone.now()
    )
    return {
        "mcp_app_tool": defs_a["tools"][0],
        "mcp_app_prompt": defs_a["prompt"],
        "mcp_app_resource": defs_a["resource"],
        "mcp_app_resourcetemplate": defs_a["template"],
        "mcp_app_mcpsession": session,
        "tenants_membership": Membership.objects.get(user=alice, tenant=tenant_a),
    }


# MCP sessions are for superusers only (AMB-271): tests/admin/test_home.py refuses them to owners.
ADMIN_MODELS = (
    "mcp_app_tool",
    "mcp_app_prompt",
    "mcp_app_resource",
    "mcp_app_resourcetemplate",
    "tenants_membership",
)


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_charlie_sees_none_of_tenant_a_rows_in_the_admin_changelist(client, charlie, rows_a, tenant_a, model):
    client.force_login(charlie)
    url = reverse(f"admin:{model}_changelist")
    response = client.get(url)
    assert response.status_code == 200
    shown = list(response.context["cl"].result_list)
    assert rows_a[model].pk not in [row.pk for row in shown]
    assert all(getattr(row, "tenant_id", None) != tenant_a.pk for row in shown)
    assert MARK not in response.content.decode()
    # Filtering or searching for tenant A explicitly reveals nothing either (the page echoes the query).
    for query in ({"tenant__id__exact": tenant_a.pk}, {"q": "tenant-a"}, {"q": MARK}):
        filtered = client.get(url, query)
        assert filtered.status_code in (200, 302)
        if filtered.status_code == 200:
            assert all(
                getattr(row, "tenant_id", None) != tenant_a.pk for row in filtered.context["cl"].result_list
            )


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_charlie_cannot_open_tenant_a_objects_in_the_admin(client, charlie, rows_a, model):
    """Another tenant's object URL is a 404, exactly like a missing one."""
    client.force_login(charlie)
    pk = rows_a[model].pk
    for view in ("change", "delete", "history"):
        response = client.get(reverse(f"admin:{model}_{view}", args=[pk]))
        # Django's admin redirects a missing object's change view to the index with a message;
        # whatever it does for a missing pk, tenant A's pk must get the same.
        missing = client.get(reverse(f"admin:{model}_{view}", args=["999999"]))
        assert response.status_code == missing.status_code
        assert response.status_code in (302, 404)
        assert MARK not in response.content.decode()


def test_charlie_cannot_open_or_change_tenant_a_settings(client, charlie, tenant_a, rows_a):
    client.force_login(charlie)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert client.get(url).status_code in (302, 404)
    response = client.post(url, {"name": "pwned", "slug": tenant_a.slug})
    assert response.status_code in (302, 403, 404)
    tenant_a.refresh_from_db()
    assert tenant_a.name == "Tenant A"
    listing = client.get(reverse("admin:tenants_tenant_changelist"))
    assert tenant_a.pk not in [row.pk for row in listing.context["cl"].result_list]


def test_charlie_cannot_delete_tenant_a_tool_by_a_bulk_action(client, charlie, rows_a):
    client.force_login(charlie)
    tool = rows_a["mcp_app_tool"]
    client.post(
        reverse("admin:mcp_app_tool_changelist"),
        {"action": "delete_selected", "_selected_action": [tool.pk], "post": "yes"},
    )
    assert Tool.objects.filter(pk=tool.pk).exists()


def test_bob_can_view_but_not_change_tenant_a_tool(client, bob, rows_a):
    client.force_login(bob)
    tool = rows_a["mcp_app_tool"]
    url = reverse("admin:mcp_app_tool_change", args=[tool.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert "a_tool" in page.content.decode()
    assert page.context["has_change_permission"] is False
    response = client.post(
        url,
        {
            "tenant": tool.tenant_id,
            "name": "renamed",
            "description": "changed by bob",
            "input_schema": json.dumps(tool.input_schema),
            "handler": tool.handler,
            "handler_config": json.dumps(tool.handler_config),
            "timeout_seconds": tool.timeout_seconds,
            "enabled": "on",
            "_publish": "Save and publish",
        },
    )
    assert response.status_code == 403
    tool.refresh_from_db()
    assert (tool.name, tool.description) == ("a_tool", f"{MARK} tool")
