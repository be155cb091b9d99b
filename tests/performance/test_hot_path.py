"""The warm request path: Redis round trips per POST, page cost, Daphne's request parsing."""

from __future__ import annotations

import asyncio
import gc
import json
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio.client
import redis.connection
from asgiref.sync import sync_to_async
from daphne.http_protocol import WebRequest
from twisted.web.test.requesthelper import DummyChannel

from mcp_app import catalog
from mcp_app.catalog import tokens
from mcp_app.core.context import RequestContext
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client
from mcp_app.models import Tool
from mcp_app.protocol import pagination
from mcp_app.protocol.jsonrpc import InvalidParams
from mcp_app.streams import sessions
from tests.transport.support import Client

ECHO = {"name": "echo", "arguments": {"message": "hi"}}
# A warm initialize: the tenant's change token, the admission script (session_admission: the one
# round trip the session caps add, AMB-102), the session stored with its set membership in one pipeline.
INITIALIZE_ROUND_TRIPS = 3


@pytest.fixture
def round_trips(monkeypatch):
    """Count Redis round trips made through redis.asyncio (a command or a pipeline execute)."""
    counter = {"n": 0}
    command = redis.asyncio.client.Redis.execute_command
    execute = redis.asyncio.client.Pipeline.execute

    async def counted_command(self, *args, **kwargs):
        counter["n"] += 1
        return await command(self, *args, **kwargs)

    async def counted_execute(self, *args, **kwargs):
        counter["n"] += 1
        return await execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.asyncio.client.Redis, "execute_command", counted_command)
    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", counted_execute)
    return counter


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_a_warm_tools_call_costs_one_redis_round_trip(tools_a, settings, round_trips):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    assert redis_client.enabled()
    client = Client()
    await client.initialize()
    assert (await client.request("tools/call", ECHO)).status == 200  # warms tenant and catalog
    for method, params in (("tools/call", ECHO), ("tools/list", {}), ("ping", None)):
        round_trips["n"] = 0
        response = await client.request(method, params)
        assert response.status == 200 and "result" in response.json(), response.body
        assert round_trips["n"] == 1, (method, round_trips["n"])


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_and_pushed_tokens_a_warm_legacy_call_makes_no_round_trip(
    tools_a, settings, round_trips, monkeypatch
):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = True
    pipelines = {"n": 0}
    execute = redis.asyncio.client.Pipeline.execute

    async def counted(self, *args, **kwargs):
        pipelines["n"] += 1
        return await execute(self, *args, **kwargs)

    try:
        client = Client()
        await client.initialize()
        assert (await client.request("tools/call", ECHO)).status == 200  # warms tenant, catalog, listener
        assert await tokens.listening()
        assert await sessions.listening()
        await client.request("tools/list", {})  # the tenant's token is now known to the listener
        await client.request("tools/list", {})  # this read of the session is kept in memory
        monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", counted)
        round_trips["n"] = 0
        response = await client.request("tools/call", ECHO)
        assert response.status == 200 and "result" in response.json(), response.body
        # The session from memory (AMB-189), the token by push: nothing is read from Redis.
        assert (round_trips["n"], pipelines["n"]) == (0, 0)
        await sync_to_async(Tool.objects.create)(
            tenant=tools_a, name="late", handler="python", handler_config={"callable": "echo"}
        )  # the token moves after commit and is pushed to every listener
        async with asyncio.timeout(5):
            while "late" not in [
                t["name"] for t in (await client.request("tools/list", {})).json()["result"]["tools"]
            ]:
                await asyncio.sleep(0.01)
    finally:
        await tokens.stop_listening()
        await sessions.stop_listening()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_a_change_made_between_two_requests_is_seen_by_the_second(tools_a, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    client = Client()
    await client.initialize()
    names = [t["name"] for t in (await client.request("tools/list", {})).json()["result"]["tools"]]
    assert "late" not in names
    await sync_to_async(Tool.objects.create)(
        tenant=tools_a, name="late", handler="python", handler_config={"callable": "echo"}
    )  # the signal moves the shared change token after commit
    names = [t["name"] for t in (await client.request("tools/list", {})).json()["result"]["tools"]]
    assert "late" in names


async def test_a_token_remembered_by_one_request_is_never_seen_by_another():
    # Outside a request nothing is memoized.
    assert not catalog.remember_token(1, 5)

    async def one_request(expected: int) -> None:
        catalog.begin_request()
        assert catalog.remember_token(1, expected)
        await asyncio.sleep(0)  # let the other request run in between
        assert await catalog.current_version(1) == expected

    await asyncio.gather(asyncio.create_task(one_request(5)), asyncio.create_task(one_request(6)))
    assert tokens._request_tokens.get() is None
    catalog.begin_request()
    assert not catalog.remember_token(1, "not a number")


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


def ctx() -> RequestContext:
    return RequestContext(tenant=TenantInfo(id=1, slug="t", name="t"))


def test_pg_a_page_after_a_cursor_costs_the_same_however_long_the_list(settings):
    settings.MCP_PAGE_SIZE = 10
    items = [Named(f"tool-{i:05d}") for i in range(10_000)]
    calls = 0

    def key(item: Named) -> str:
        nonlocal calls
        calls += 1
        return item.name

    cursor = pagination.encode_cursor(ctx(), "tools", "tool-05000")
    calls = 0
    page, next_cursor = pagination.paginate(ctx(), {"cursor": cursor}, "tools", items, key)
    assert [p.name for p in page] == [f"tool-{i:05d}" for i in range(5001, 5011)]
    assert calls < 40  # a binary search and the page's last key, not one call per tool
    assert pagination.decode_cursor(ctx(), "tools", next_cursor) == "tool-05010"


def test_pg_pages_cover_the_list_once_and_a_cursor_between_keys_resumes_after_it(settings):
    items = [Named(n) for n in ("a", "b", "c", "d", "e")]
    seen, params = [], {}
    while True:
        page, next_cursor = pagination.paginate(ctx(), params, "tools", items, lambda t: t.name, page_size=2)
        seen += [p.name for p in page]
        if next_cursor is None:
            break
        params = {"cursor": next_cursor}
    assert seen == ["a", "b", "c", "d", "e"]
    # The key a cursor names may have been deleted meanwhile (PG-04): resume after where it was.
    gone = pagination.encode_cursor(ctx(), "tools", "bb")
    page, _ = pagination.paginate(ctx(), {"cursor": gone}, "tools", items, lambda t: t.name, page_size=2)
    assert [p.name for p in page] == ["c", "d"]
    with pytest.raises(InvalidParams):
        pagination.paginate(ctx(), {"cursor": "forged"}, "tools", items, lambda t: t.name)


def test_daphne_requests_skip_twisteds_form_parsing_of_the_body():
    """Twisted parsed every POST's Content-Type through the email package just to fill request.args."""
    # Imported here, in this one test: importing the ASGI app installs the tuning process-wide.
    import mcpsite.asgi  # noqa: F401, PLC0415

    class Server:
        def protocol_connected(self, request) -> None:
            pass

    channel = DummyChannel()
    channel.factory = type("Factory", (), {"server": Server()})()
    request = WebRequest(channel)
    assert request._parsePOSTFormSubmission is False


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def modern_request(method: str, params: dict) -> dict:
    """One 2026-07-28 request as the SDK sends it (headers mirror the body)."""
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    response = await Client().post(message, headers=headers)
    assert response.status == 200, response.body
    return response.json()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_a_warm_2026_request_makes_no_redis_round_trip_and_still_sees_changes(
    tools_a, settings, round_trips
):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = True
    await modern_request("tools/call", ECHO)  # warms the tenant, the catalog and the token listener
    assert await tokens.listening()
    await modern_request("tools/list", {})  # the tenant's token is now known to the listener
    for method, params in (("tools/call", ECHO), ("tools/list", {}), ("server/discover", {})):
        round_trips["n"] = 0
        assert "result" in await modern_request(method, params)
        assert round_trips["n"] == 0, (method, round_trips["n"])
    await sync_to_async(Tool.objects.create)(
        tenant=tools_a, name="late", handler="python", handler_config={"callable": "echo"}
    )  # the token moves after commit and is pushed to every listener
    names = [t["name"] for t in (await modern_request("tools/list", {}))["result"]["tools"]]
    assert "late" in names
    await tokens.stop_listening()


def test_the_served_application_freezes_its_startup_heap_so_full_collections_skip_it():
    # Daphne's p99 tail was full collections scanning Django's heap (bench/run.py --only-modern --profile).
    import mcpsite.asgi  # noqa: F401, PLC0415 - the import is what is tested

    assert gc.get_freeze_count() > 10_000


def another_process_moves(tenant_id: int) -> int:
    """What tokens.move does in another process: the script alone (this process learns nothing directly)."""
    key = tokens.version_key(tenant_id)
    script = tokens._BUMP
    return int(
        redis_client.sync_client().eval(
            script, 1, key, tokens._fresh_token(), redis_client.channel(tokens.CHANGES_CHANNEL), tenant_id
        )
    )


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_a_token_moved_by_another_process_reaches_this_one_by_push(
    tools_a, settings, round_trips
):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = True
    try:
        await tokens.current_version(tools_a.id)  # starts this loop's listener
        assert await tokens.listening()
        before = await tokens.current_version(tools_a.id)
        assert before > 2**40  # real tokens are that large (they start from the clock)
        moved = await sync_to_async(another_process_moves)(tools_a.id)
        async with asyncio.timeout(5):
            while tokens._pushed.get(tools_a.id) != moved:
                await asyncio.sleep(0.01)
        round_trips["n"] = 0
        assert await tokens.current_version(tools_a.id) == moved
        assert round_trips["n"] == 0
    finally:
        await tokens.stop_listening()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_tokens_of_a_deployment_on_another_database_of_the_server_are_not_heard(
    tools_a, settings
):
    """Pub/sub channels are server-wide while keys are per database: a test run beside a benchmark
    heard the benchmark's tokens for the same tenant ids and served stale catalogs."""
    ours = settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = True
    db = int(redis.connection.parse_url(ours).get("db", 0))
    try:
        before = await tokens.current_version(tools_a.id)
        assert await tokens.listening()
        settings.REDIS_URL = urlunsplit(urlsplit(ours)._replace(path=f"/{(db + 1) % 16}"))
        theirs = redis_client.channel(tokens.CHANGES_CHANNEL)
        settings.REDIS_URL = ours
        # The other deployment's tenant with the same id moves far ahead; then ours moves a little.
        await sync_to_async(redis_client.sync_client().publish)(theirs, f"{tools_a.id} {before + 10**9}")
        moved = await sync_to_async(another_process_moves)(tools_a.id)
        async with asyncio.timeout(5):
            while tokens._pushed.get(tools_a.id) != moved:
                await asyncio.sleep(0.01)
    finally:
        await tokens.stop_listening()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_with_redis_a_new_session_costs_one_round_trip_for_its_admission(
    tools_a, settings, round_trips
):
    """The caps on sessions (AMB-102) add one script to an initialize, and nothing to later requests."""
    settings.REDIS_URL = os.environ["REDIS_URL"]
    await Client().initialize()  # warms tenant and catalog
    round_trips["n"] = 0
    await Client().initialize(initialized=False)
    assert round_trips["n"] == INITIALIZE_ROUND_TRIPS


@pytest.mark.django_db(transaction=True)
async def test_a_warm_legacy_tools_call_encodes_json_once_for_its_answer(tools_a, settings, monkeypatch):
    """Whether a request changed its session is seen without encoding the session (twice), and the
    in-flight registry keys an integer id without json.dumps."""
    settings.MCP_TOOL_CALLS_PER_MINUTE = 0
    client = Client()
    await client.initialize(version="2025-11-25")
    assert (await client.request("tools/call", ECHO)).status == 200  # warms tenant and catalog
    encoded: list[Any] = []
    dumps = json.dumps

    def counted(value: Any, *args: Any, **kwargs: Any) -> str:
        encoded.append(value)
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", counted)
    response = await client.request("tools/call", ECHO, id=7)
    monkeypatch.undo()
    assert response.status == 200 and response.json()["result"]["content"], response.body
    requests = [value for value in encoded if isinstance(value, dict) and value.get("method")]
    answers = [value for value in encoded if isinstance(value, dict) and "result" in value]
    states = [value for value in encoded if isinstance(value, dict) and "tenant_id" in value]
    assert len(requests) == 1 and len(answers) == 1  # the test's client, the server's answer
    # The database store hands out a copy of its cached session by a JSON round trip (sessions._copy);
    # Redis holds the session as JSON and only decodes it. Nothing encodes it to compare.
    assert len(states) == (0 if redis_client.enabled() else 1), encoded
    assert len(encoded) == 2 + len(states), encoded


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_warm_calls_leave_no_reference_cycles_for_the_collector(tools_a, settings):
    """What a call builds is freed by reference counting when it ends: a cycle (a closure naming itself
    was one, on every legacy call) leaves the call's context, exchange and consumer to the collector,
    whose young collections then ran every ~6 calls (AMB-196)."""
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = True
    client = Client()
    await client.initialize(version="2025-11-25")
    for _ in range(20):  # warm: the tenant, the catalog, the listeners, the session in memory
        assert (await client.request("tools/call", ECHO)).status == 200
        await modern_request("tools/call", ECHO)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(50):
            assert (await client.request("tools/call", ECHO)).status == 200
            await modern_request("tools/call", ECHO)
        gc.collect()
        left = [type(thing).__qualname__ for thing in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        await tokens.stop_listening()
        await sessions.stop_listening()
    assert len(left) < 20, sorted(set(left))  # 100 calls: not one cycle per call
