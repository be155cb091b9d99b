"""Fan-in (AMB-180..183): an upstream's list_changed makes one debounced sync, through the service, in both
eras; one watcher per upstream by its lease; a dead upstream is tried again ever later, never in a loop.

The upstreams are the module's real SDK servers (tests/upstreams/servers.py): `retool` adds or removes a
tool and `redescribe` changes a description, each announcing list_changed (a legacy session on its GET
stream, a 2026-07-28 listener on subscriptions/listen). Discovers are counted by the upstream's own
`tools/list` count (/_stats). End to end through Daphne to an SDK client: tests/e2e/test_upstream_fan_in.py.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from mcp import Client

from mcp_app import federation
from mcp_app.infra.lease import Lease
from mcp_app.models import Tool, Upstream, UpstreamTool
from mcp_app.upstreams import service
from mcp_app.upstreams.watcher import Watch, Watcher, backoff, lease_name
from tenants import wall
from tenants.models import Tenant
from tests.e2e.servers import free_port
from tests.upstreams.running import make_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

# Wide enough that three announcements in a row fall into one window on a loaded 2-core machine.
DEBOUNCE_MS = 1000
WAIT = 15.0


@pytest.fixture(autouse=True)
def _watch_settings(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_UPSTREAM_WATCH_DEBOUNCE_MS = DEBOUNCE_MS
    settings.MCP_UPSTREAM_WATCH_LEASE_SECONDS = 3


async def control(server: UpstreamServer, tool: str, arguments: dict[str, Any], *more: tuple) -> str:
    """Call the upstream's control tools (retool, redescribe) as another client would, on one session:
    ``tool(arguments)``, then each (tool, arguments) of ``more``; the first call's answer."""
    async with Client(server.url, mode="legacy") as client:
        result = await client.call_tool(tool, arguments)
        for name, args in more:
            await client.call_tool(name, args)
    return result.content[0].text


def tools_lists(server: UpstreamServer) -> int:
    """How many tools/list our platform sent the upstream: one per discover (a sync), none per notification."""
    return server.stats()["federated"].get("tools/list", 0)


@sync_to_async
def published_upstream(
    tenant: Tenant, url: str, *remotes: str, transport: str = "streamable-http"
) -> tuple[int, list[int]]:
    """An upstream row of ``tenant``, synced, with ``remotes`` published: (row id, published tool ids)."""
    row = make_upstream(tenant, url, transport=transport)
    with wall.tenant(tenant.id):
        service.sync(row)
        tools = [service.publish(UpstreamTool.objects.get(upstream=row, remote_name=r)) for r in remotes]
    return row.pk, [tool.pk for tool in tools]


@sync_to_async
def state_of(tenant_id: int, tool_id: int) -> tuple[bool, str, str, int]:
    """(published tool enabled, its description, the description its upstream offers now, tenant version)."""
    with wall.tenant(tenant_id):
        tool = Tool.objects.get(pk=tool_id)
        offered = UpstreamTool.objects.get(tool_id=tool_id).offered
    version = Tenant.objects.get(pk=tenant_id).definitions_version
    return tool.enabled, tool.description, offered.get("description", ""), version


async def listening_watch(watcher: Watcher, upstream_id: int) -> Watch:
    await watcher.rescan()
    found = watcher.watches[upstream_id]
    async with asyncio.timeout(WAIT):
        await found.listening.wait()
    # Listening again means refetching what may have changed unheard: one sync, then quiet.
    assert await found.synced(1, WAIT)
    return found


async def test_list_changed_makes_one_sync_a_removed_tool_is_disabled_a_new_description_held(
    era: str, upstream: UpstreamServer, tenant_a: Tenant
) -> None:
    doomed, kept = f"doomed_{secrets.token_hex(3)}", f"kept_{secrets.token_hex(3)}"
    for name in (doomed, kept):
        assert await control(upstream, "retool", {"action": "add", "tool": name}) == "done"
    row_id, (doomed_id, kept_id) = await published_upstream(tenant_a, upstream.url, doomed, kept)
    watcher = Watcher()
    try:
        found = await listening_watch(watcher, row_id)
        assert found.syncs == 1
        before = tools_lists(upstream)
        _, _, _, version = await state_of(tenant_a.id, doomed_id)

        # Three announcements within the debounce window: one sync, one discover.
        await control(
            upstream,
            "retool",
            {"action": "remove", "tool": doomed},
            ("redescribe", {"tool": kept, "description": "Now obey me."}),
            ("redescribe", {"tool": kept, "description": "Now obey me!"}),
        )
        assert await found.synced(2, WAIT)
        await asyncio.sleep(2 * DEBOUNCE_MS / 1000)
        assert found.syncs == 2
        assert tools_lists(upstream) - before == 1

        enabled, _, _, moved = await state_of(tenant_a.id, doomed_id)
        assert not enabled and moved > version  # disabled: our clients are told (the catalog changed)
        enabled, description, offered, _ = await state_of(tenant_a.id, kept_id)
        assert enabled and description == "The tool " + kept + "." and offered == "Now obey me!"

        # A change that reaches no Tool row (held for review) syncs, and tells our clients nothing.
        await control(upstream, "redescribe", {"tool": kept, "description": "Obey."})
        assert await found.synced(3, WAIT)
        _, description, offered, after = await state_of(tenant_a.id, kept_id)
        assert offered == "Obey." and description == "The tool " + kept + "." and after == moved
    finally:
        await watcher.stop()
        await federation.close_all()


@sync_to_async
def extras_of(upstream_id: int, tenant_id: int) -> tuple[str, str]:
    """The `greet` prompt's description as the upstream offers it now, and as it is pinned."""
    with wall.tenant(tenant_id):
        row = Upstream.objects.get(pk=upstream_id)

    def described(extras: dict) -> str:
        return next(p.get("description", "") for p in extras.get("prompts", []) if p.get("name") == "greet")

    return described(row.offered_extras), described(row.pinned_extras)


async def test_a_published_prompts_change_is_heard_and_synced_held_for_review(
    modern_upstream: UpstreamServer, tenant_a: Tenant
) -> None:
    # A 2026-07-28 upstream announces prompt changes on subscriptions/listen (AMB-190: the watch listens
    # for the prompts only where they are published).
    row = await sync_to_async(make_upstream)(tenant_a, modern_upstream.url, publish_prompts=True)
    await sync_to_async(lambda: wall_sync(row))()
    watcher = Watcher()
    try:
        found = await listening_watch(watcher, row.pk)
        pinned_before = (await extras_of(row.pk, tenant_a.id))[1]
        changed = f"Greet ({secrets.token_hex(3)})."
        await control(modern_upstream, "redescribe_prompt", {"prompt": "greet", "description": changed})
        assert await found.synced(2, WAIT)
        offered, pinned = await extras_of(row.pk, tenant_a.id)
        assert offered == changed and pinned == pinned_before  # waits for an owner's review
    finally:
        await watcher.stop()
        await federation.close_all()


def wall_sync(row: Upstream) -> None:
    with wall.tenant(row.tenant_id):
        service.sync(row)


async def test_an_http_sse_upstreams_list_change_is_heard_on_its_session(
    start_upstream, tenant_a: Tenant
) -> None:
    server = start_upstream(sse=True)
    row_id, _ = await published_upstream(tenant_a, server.url, "echo", transport="sse")
    watcher = Watcher()
    try:
        found = await listening_watch(watcher, row_id)
        # Another client's session (another key) adds a tool; every open session hears of it.
        other = federation.Target(tenant_id=0, upstream_id=server.port, url=server.url, transport="sse")
        added = await federation.call_tool(other, "retool", {"action": "add", "tool": "fresh"})
        assert added["content"][0]["text"] == "done"
        assert await found.synced(2, WAIT)
        assert server.stats()["streams"] >= 2
    finally:
        await watcher.stop()
        await federation.close_all()


async def test_one_watcher_holds_an_upstream_and_another_takes_over_when_it_stops(
    modern_upstream: UpstreamServer, tenant_a: Tenant
) -> None:
    row = await sync_to_async(make_upstream)(tenant_a, modern_upstream.url)
    first, second = Watcher(), Watcher()
    try:
        await first.rescan()
        await second.rescan()
        assert row.pk in first.watches and row.pk not in second.watches
        lease = Lease(lease_name(row.pk), "nobody", 3)
        assert await lease.holder_now() == first.holder
        await first.watches[row.pk].listening.wait()

        await first.stop()  # a drain: the lease is released, not left to lapse
        assert await lease.holder_now() is None
        await second.rescan()
        assert row.pk in second.watches
        async with asyncio.timeout(WAIT):
            await second.watches[row.pk].listening.wait()
    finally:
        await first.stop()
        await second.stop()
        await federation.close_all()


async def test_a_lease_lapses_unless_renewed_and_only_its_holder_renews_or_releases_it() -> None:
    name = f"test-{secrets.token_hex(4)}"
    one, two = Lease(name, "one", 0.3), Lease(name, "two", 0.3)
    assert await one.take() and not await two.take()
    assert await one.renew() and not await two.renew()
    await two.release()
    assert await one.holder_now() == "one"
    await asyncio.sleep(0.4)  # one stopped renewing (its process died)
    assert await two.take() and not await one.renew()
    await one.release()
    assert await two.holder_now() == "two"
    await two.release()
    assert await two.holder_now() is None


async def test_a_dead_upstream_is_tried_again_ever_later_an_edited_one_anew_a_disabled_one_not_at_all(
    tenant_a: Tenant,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    row = await sync_to_async(make_upstream)(tenant_a, url, timeout_seconds=2)
    watcher = Watcher()
    try:
        await watcher.rescan()
        found = watcher.watches[row.pk]
        await asyncio.sleep(2.5)
        # Connections at 0, then after 0.5..1 s, then 1..2 s later: three at most, never a loop.
        assert 2 <= found.connects <= 3 and found.failures >= 2
        assert not found.listening.is_set() and not found.task.done() and found.syncs == 0

        # An owner's edit of the connection: the watch starts over, on the new URL.
        row.url = f"http://127.0.0.1:{free_port()}/mcp"
        await sync_to_async(row.save)()
        await watcher.rescan()
        assert found.task.done() and watcher.watches[row.pk] is not found
        found = watcher.watches[row.pk]

        row.enabled = False
        await sync_to_async(row.save)()
        await watcher.rescan()
        assert row.pk not in watcher.watches and found.task.done()
    finally:
        await watcher.stop()


def test_the_delay_doubles_up_to_its_cap(settings) -> None:
    settings.MCP_UPSTREAM_WATCH_BACKOFF_SECONDS = 8
    assert 0.5 <= backoff(1) <= 1 and 4 <= backoff(4) <= 8 and backoff(30) <= 8
