"""The one in-process cache (mcp_app/infra/cache.py, AMB-300): expiry, the size bound, the overlap rule and
the eviction message, tested once here for its four users (the bearer tokens, the vault's handed-out
tokens, the sessions kept in memory, an identity provider's verdicts).

"Another process" is played by a second Redis client publishing on the channel, as another process's
signal handler or session store does.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass

import pytest
import redis
import redis.asyncio
from django.db import transaction

from mcp_app.infra import cache as infra_cache
from mcp_app.infra import redis_client
from mcp_app.infra.cache import Cache


@dataclass(frozen=True)
class Record:
    user_id: int | None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


# --- expiry and the size bound ---------------------------------------------------------------------------


def test_an_entry_lives_its_seconds_and_not_a_moment_more(clock):
    cache = Cache("test-expiry", 10, timer=clock)
    assert cache.put("k", "v", cache.mark(), 5)
    clock.now += 4.9
    assert cache.get("k") == "v"
    clock.now += 0.2
    assert cache.get("k") is None


def test_each_entry_has_its_own_seconds_and_none_or_less_keeps_nothing(clock):
    cache = Cache("test-seconds", 10, timer=clock)
    cache.put("short", 1, cache.mark(), 1)
    cache.put("long", 2, cache.mark(), 60)
    assert not cache.put("never", 3, cache.mark(), 0)
    assert not cache.put("past", 4, cache.mark(), -3)
    clock.now += 2
    assert (cache.get("short"), cache.get("long"), cache.get("never"), cache.get("past")) == (
        None,
        2,
        None,
        None,
    )


def test_past_its_size_the_least_recently_used_entry_goes_first(clock):
    cache = Cache("test-bound", 3, timer=clock)
    for n in range(3):
        cache.put(f"s{n}", n, cache.mark(), 60)
    assert cache.get("s0") == 0  # read: now the most recently used
    cache.put("s3", 3, cache.mark(), 60)
    cache.put("s4", 4, cache.mark(), 60)
    assert [key for key in ("s0", "s1", "s2", "s3", "s4") if key in cache] == ["s0", "s3", "s4"]
    assert len(cache) == 3


def test_a_flood_in_one_pool_never_pushes_out_the_other(clock):
    cache = Cache("test-pools", 2, pools=2, timer=clock)
    cache.put("good", "valid", cache.mark(), 60, pool=0)
    for n in range(100):
        cache.put(f"made-up-{n}", "refused", cache.mark(), 60, pool=1)
    assert cache.get("good") == "valid"
    assert len(cache) == 3
    # A key moving to the other pool leaves the first: one answer per key.
    cache.put("good", "refused now", cache.mark(), 60, pool=1)
    assert cache.get("good") == "refused now" and len(cache) == 2


# --- the overlap rule: a read that started before an eviction keeps nothing -------------------------


@pytest.mark.parametrize(
    "change",
    [
        lambda cache: cache.evict("another key"),  # a change heard while the read was in flight
        lambda cache: cache.evict_by("user_id", 7),  # a user's membership changed
        lambda cache: cache.clear(),  # the subscriber (re)subscribed: messages may have been lost
    ],
    ids=["evict", "evict_by", "clear"],
)
def test_a_read_that_overlapped_an_eviction_is_not_kept(change, clock):
    cache = Cache("test-overlap", 10, timer=clock)
    mark = cache.mark()  # the read starts
    change(cache)
    assert not cache.put("k", Record(user_id=7), mark, 60)  # it may predate the change: not kept
    assert cache.get("k") is None
    assert cache.put("k", Record(user_id=7), cache.mark(), 60)  # a read started after it is kept


async def test_an_eviction_from_another_thread_during_an_awaited_read_is_honoured(clock):
    """Django's signal handlers evict from a sync thread while the loop awaits the database."""
    cache = Cache("test-thread", 10, timer=clock)
    cache.put("k", "old", cache.mark(), 60)
    mark = cache.mark()

    await asyncio.to_thread(cache.evict, "k")  # the revocation, meanwhile, on another thread
    assert not cache.put("k", "read before the revocation", mark, 60)
    assert cache.get("k") is None


def test_evict_by_drops_only_the_entries_whose_field_matches(clock):
    cache = Cache("test-by", 10, pools=2, timer=clock)
    cache.put("a", Record(user_id=1), cache.mark(), 60)
    cache.put("b", Record(user_id=2), cache.mark(), 60, pool=1)
    cache.put("c", Record(user_id=None), cache.mark(), 60, pool=1)
    cache.evict_by("user_id", 2)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (Record(1), None, Record(None))


# --- the eviction message ---------------------------------------------------------------------------------


def test_a_message_evicts_by_key_or_by_field_in_the_cache_it_names_and_junk_is_ignored(clock):
    tokens = Cache("test-msg-tokens", 10, timer=clock)
    handed = Cache("test-msg-handed", 10, timer=clock)
    tokens.put("k", Record(user_id=5), tokens.mark(), 60)
    tokens.put("j", Record(user_id=6), tokens.mark(), 60)
    handed.put((1, 2, "github"), "gho_x", handed.mark(), 60)
    handed.put("k", "same key, other cache", handed.mark(), 60)
    for junk in (
        b"\xff not json",
        "[]",
        '"k"',
        '{"key": "k"}',
        '{"cache": "nobody", "key": "k"}',
        '{"cache": "test-msg-tokens", "key": {"a": 1}}',
        '{"cache": "test-msg-tokens", "field": 3}',
    ):
        infra_cache._on_message(junk)
    assert tokens.get("k") is not None and len(tokens) == 2 and len(handed) == 2
    infra_cache._on_message(json.dumps({"cache": "test-msg-tokens", "key": "k"}))
    assert tokens.get("k") is None and handed.get("k") == "same key, other cache"
    infra_cache._on_message(json.dumps({"cache": "test-msg-tokens", "field": "user_id", "value": 6}))
    assert tokens.get("j") is None
    # A tuple key travels as a JSON list.
    infra_cache._on_message(json.dumps({"cache": "test-msg-handed", "key": (1, 2, "github")}))
    assert handed.get((1, 2, "github")) is None


@pytest.mark.django_db
def test_without_redis_an_eviction_everywhere_is_an_eviction_here(clock, settings):
    settings.REDIS_URL = ""
    cache = Cache("test-local", 10, timer=clock)
    cache.put("k", "v", cache.mark(), 60)
    mark = cache.mark()
    cache.evict_everywhere("k")
    assert cache.get("k") is None and not cache.put("k", "v", mark, 60)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_message_is_published_once_the_transaction_commits(clock, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    cache = Cache("test-commit", 10, timer=clock)
    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub()
    try:
        pubsub.subscribe(redis_client.channel(infra_cache.CHANNEL))
        assert pubsub.get_message(timeout=2)["type"] == "subscribe"
        cache.put("k", "v", cache.mark(), 60)
        with transaction.atomic():
            cache.evict_everywhere("k")
            assert cache.get("k") is None  # here at once
            # Not yet: another process reading the row now would still find it and keep it again.
            assert pubsub.get_message(timeout=0.2) is None
        assert json.loads(pubsub.get_message(timeout=2)["data"]) == {"cache": "test-commit", "key": "k"}
        cache.evict_by_everywhere("user_id", 9)
        assert json.loads(pubsub.get_message(timeout=2)["data"]) == {
            "cache": "test-commit",
            "field": "user_id",
            "value": 9,
        }
    finally:
        pubsub.close()
        client.close()


@pytest.fixture
async def listening(settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    other = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        yield other
    finally:
        await other.aclose()
        await infra_cache.stop_listening()


async def until(predicate, seconds: float = 3.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(0.01)


@pytest.mark.services
async def test_another_process_evicts_here_through_the_one_channel_and_a_subscription_starts_clean(
    clock, listening
):
    first = Cache("test-sub-a", 10, timer=clock)
    second = Cache("test-sub-b", 10, timer=clock)
    deaf = Cache("test-sub-c", 10, timer=clock)
    first.put("kept before", 1, first.mark(), 60)
    deaf.put("kept before", 1, deaf.mark(), 60)
    mark = second.mark()
    first.listen()
    second.listen()
    assert await infra_cache.listening()
    assert infra_cache.live()
    # Subscribing cleared every cache that listens: what was published before it may have been missed.
    assert first.get("kept before") is None and not second.put("read before", 1, mark, 60)
    assert deaf.get("kept before") == 1  # one that never listened relies on its expiry alone
    first.put("k", 1, first.mark(), 60)
    second.put("k", 2, second.mark(), 60)
    await listening.publish(*first.message("k"))
    await until(lambda: first.get("k") is None)
    assert second.get("k") == 2  # one channel, but each message names its cache
    await infra_cache.stop_listening()
    assert not infra_cache.live()
