"""The catalog: cached tenant facts and definitions, invalidated by version (no ORM on a cache hit)."""

from __future__ import annotations

import os

import pytest
import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings

from mcp_app import catalog
from mcp_app.catalog import loader, tokens
from mcp_app.models import Tool
from tenants.models import Tenant


class Counter:
    """Wrap a loader and count its calls (each call is at least one ORM query)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


@pytest.fixture
def counted(monkeypatch) -> dict[str, Counter]:
    places = {"_load_tenant": loader, "_load_catalog": loader, "_db_version": tokens}
    counters = {}
    for name, module in places.items():
        attribute = name.lstrip("_") if module is tokens else name
        counters[name] = Counter(getattr(module, attribute))
        monkeypatch.setattr(module, attribute, counters[name])
    return counters


async def test_get_tenant_returns_the_active_tenant_and_hides_unknown_and_inactive_ones(demo_a, tenant_b):
    info = await catalog.get_tenant("tenant-a")
    assert info.id == demo_a.id and info.name == "Tenant A" and info.instructions == "Use tenant A's tools."
    assert info.title == "Demo MCP server"
    assert await catalog.get_tenant("no-such-tenant") is None
    tenant_b.is_active = False
    await sync_to_async(tenant_b.save)()
    assert await catalog.get_tenant("tenant-b") is None


async def test_a_cache_hit_makes_no_database_query(demo_a, counted):
    await catalog.get_tenant("tenant-a")
    await catalog.get_catalog(demo_a.id)
    before = {name: c.calls for name, c in counted.items()}
    for _ in range(5):
        assert (await catalog.get_tenant("tenant-a")).id == demo_a.id
        assert "echo" in (await catalog.get_catalog(demo_a.id)).tools_by_name
    assert {name: c.calls for name, c in counted.items()} == before


async def test_an_edit_is_visible_at_once_through_note_change(demo_a, counted):
    first = await catalog.get_catalog(demo_a.id)
    assert "new_tool" not in first.tools_by_name
    # The signals bump the version after commit and call note_change.
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a, name="new_tool", handler="template", handler_config={"text": "x"}
    )
    second = await catalog.get_catalog(demo_a.id)
    assert "new_tool" in second.tools_by_name
    assert second.version > first.version


async def test_a_tenant_edit_reloads_the_tenant_facts(demo_a):
    assert (await catalog.get_tenant("tenant-a")).instructions == "Use tenant A's tools."
    demo_a.instructions = "New instructions."
    await sync_to_async(demo_a.save)()
    assert (await catalog.get_tenant("tenant-a")).instructions == "New instructions."


async def test_disabled_definitions_are_not_in_the_catalog(demo_a):
    built = await catalog.get_catalog(demo_a.id)
    assert "disabled_tool" not in built.tools_by_name
    assert [t.name for t in built.tools] == sorted(t.name for t in built.tools)


@pytest.fixture
def no_redis(settings) -> None:
    settings.REDIS_URL = None


async def test_without_redis_an_edit_by_another_process_is_seen_after_the_recheck_interval(
    demo_a, monkeypatch, no_redis
):
    await catalog.get_catalog(demo_a.id)
    # Another process bumps the version without calling our note_change.
    await sync_to_async(Tenant(pk=demo_a.pk).bump_version)()
    monkeypatch.setattr(tokens, "LOCAL_RECHECK_SECONDS", 0.0)
    assert await catalog.current_version(demo_a.id) == demo_a.definitions_version + 1


async def test_without_redis_the_token_follows_the_database_even_backwards(demo_a, monkeypatch, no_redis):
    catalog.note_change(demo_a.id, 50)  # e.g. a database that was later recreated
    assert await catalog.current_version(demo_a.id) == 50
    monkeypatch.setattr(tokens, "LOCAL_RECHECK_SECONDS", 0.0)
    assert await catalog.current_version(demo_a.id) == demo_a.definitions_version


async def test_a_shared_version_ahead_of_the_database_still_gives_cache_hits(demo_a, counted, no_redis):
    catalog.note_change(demo_a.id, demo_a.definitions_version + 100)  # e.g. a restored database
    await catalog.get_tenant("tenant-a")
    await catalog.get_catalog(demo_a.id)
    loads = (counted["_load_tenant"].calls, counted["_load_catalog"].calls)
    await catalog.get_tenant("tenant-a")
    await catalog.get_catalog(demo_a.id)
    assert (counted["_load_tenant"].calls, counted["_load_catalog"].calls) == loads


@pytest.mark.services
async def test_with_redis_the_change_token_is_shared_and_moves_on_every_change(demo_a, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    key = catalog.version_key(demo_a.id)
    try:
        await client.delete(key)
        # A missing counter (new tenant, flushed Redis) starts far above any earlier value.
        first = await catalog.current_version(demo_a.id)
        assert first > 10**15 and int(await client.get(key)) == first
        # Another process's change (here: a direct write) is seen at once.
        await client.set(key, first + 5)
        assert await catalog.current_version(demo_a.id) == first + 5
        # note_change moves the token whatever version number it is given.
        await sync_to_async(catalog.note_change)(demo_a.id, 3)
        assert await catalog.current_version(demo_a.id) == first + 6
    finally:
        await client.delete(key)
        await client.aclose()
        await tokens._async_redis().aclose()


@pytest.mark.services
async def test_with_redis_an_edit_is_seen_even_when_the_token_is_far_ahead_of_the_database(demo_a, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    key = catalog.version_key(demo_a.id)
    try:
        # Redis outlived a database that had reached a much higher version (restored, recreated).
        await client.set(key, 10**6)
        before = await catalog.get_catalog(demo_a.id)
        assert before.tools_by_name["echo"].description != "changed"
        await sync_to_async(Tool.objects.filter(tenant=demo_a, name="echo").update)(description="changed")
        await sync_to_async(Tenant(pk=demo_a.pk).bump_version)()
        await sync_to_async(catalog.note_change)(demo_a.id, demo_a.definitions_version + 1)
        after = await catalog.get_catalog(demo_a.id)
        assert after.tools_by_name["echo"].description == "changed"
    finally:
        await client.delete(key)
        await client.aclose()
        await tokens._async_redis().aclose()


async def test_a_process_keeps_the_tenants_it_served_last_and_loads_an_evicted_one_again(
    demo_a, tenant_b, counted, monkeypatch
):
    """AMB-367: at most MCP_CATALOG_TENANTS tenants' facts and catalogs per process, least recently used
    out; an evicted tenant is served again, loaded as a cold one."""
    assert loader._tenants.maxsize == loader._catalogs.maxsize == settings.MCP_CATALOG_TENANTS == 2000
    monkeypatch.setattr(loader, "_tenants", loader.LRUCache(1))
    monkeypatch.setattr(loader, "_catalogs", loader.LRUCache(1))
    assert (await catalog.get_tenant("tenant-a")).id == demo_a.id
    assert "echo" in (await catalog.get_catalog(demo_a.id)).tools_by_name
    loads = counted["_load_catalog"].calls, counted["_load_tenant"].calls
    assert (await catalog.get_tenant("tenant-a")).id == demo_a.id  # kept: no load
    await catalog.get_catalog(demo_a.id)
    assert (counted["_load_catalog"].calls, counted["_load_tenant"].calls) == loads
    assert (await catalog.get_tenant("tenant-b")).id == tenant_b.id  # B in, A out
    await catalog.get_catalog(tenant_b.id)
    assert list(loader._tenants) == ["tenant-b"] and list(loader._catalogs) == [tenant_b.id]
    assert (await catalog.get_tenant("tenant-a")).id == demo_a.id
    assert "echo" in (await catalog.get_catalog(demo_a.id)).tools_by_name
    assert counted["_load_catalog"].calls == loads[0] + 2  # B's, then A's again
