"""REDIS_URL names a plain Redis or one behind Sentinel, and every client of the platform follows it (AMB-370).

The failover itself, with real sentinels, is tests/e2e/test_sentinel.py; here the reading of the URL and
the settings and pools it makes, with no Redis running.
"""

from __future__ import annotations

import json
import os

import pytest
import redis

from lib import redis_url
from mcp_app.infra import redis_client
from tests import zygote

SENTINEL = "redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26380/mcp/4?sentinel_password=watch"


def test_a_plain_url_is_read_as_redis_reads_it() -> None:
    assert redis_url.parse("redis://127.0.0.1:6379/3").db == 3
    assert redis_url.parse("redis://127.0.0.1:6379?db=5").db == 5
    assert redis_url.parse("unix:///run/redis.sock?db=2").db == 2
    assert not redis_url.parse("rediss://cache.example:6380/0").sentinel
    assert redis_url.parse("redis://h/1").celery_broker() == ("redis://h/1", {})


def test_a_sentinel_url_names_the_sentinels_the_service_the_database_and_the_passwords() -> None:
    target = redis_url.parse(SENTINEL)
    assert target.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380))
    assert (target.service, target.db) == ("mcp", 4)
    assert target.master_kwargs() == {"db": 4, "password": "secret"}
    assert target.sentinel_kwargs() == {"password": "watch"}
    assert "secret" not in repr(target) and "watch" not in repr(target)
    # Kombu's own spelling: credentials and db on the first sentinel, the service as a transport option.
    assert target.celery_broker() == (
        "sentinel://:secret@10.0.0.1:26379/4;sentinel://10.0.0.2:26380",
        {"master_name": "mcp", "sentinel_kwargs": {"password": "watch"}},
    )
    assert redis_url.parse("redis+sentinel://s1/mcp").sentinels == (("s1", 26379),)
    assert redis_url.parse("redis+sentinel://s1/mcp").db == 0


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:6379", "must be redis://"),
        ("redis+sentinel://s1:26379", "/service[/db]"),
        ("redis+sentinel://s1:26379/mcp/one", "must be a number"),
        ("redis+sentinel://s1:port/mcp", "host:port"),
        ("redis+sentinel:///mcp", "/service[/db]"),
    ],
)
def test_a_url_of_neither_kind_is_refused_with_the_form_it_should_have(url: str, says: str) -> None:
    with pytest.raises(redis_url.RedisUrlError, match=says.replace("[", r"\[").replace("]", r"\]")):
        redis_url.parse(url)


def test_the_pools_of_a_sentinel_url_ask_the_sentinels_and_wait_for_a_free_connection() -> None:
    pool = redis_client.sync_pool(SENTINEL)
    assert isinstance(pool, redis_client.SentinelBlockingConnectionPool)
    assert isinstance(pool, redis.BlockingConnectionPool)  # waits instead of MaxConnectionsError
    assert pool.service_name == "mcp" and pool.connection_class is redis_client.SentinelConnection
    assert pool.connection_kwargs["db"] == 4 and pool.connection_kwargs["password"] == "secret"
    assert pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs["password"] == "watch"
    asynchronous = redis_client.async_pool(SENTINEL)
    assert isinstance(asynchronous, redis_client.AsyncSentinelBlockingConnectionPool)
    assert asynchronous.connection_class is redis_client.AsyncSentinelConnection
    # Django's cache builds its pools through the same door.
    assert isinstance(redis_client.CachePool.from_url(SENTINEL), redis_client.SentinelBlockingConnectionPool)
    assert isinstance(redis_client.CachePool.from_url("redis://h/0"), redis.BlockingConnectionPool)


def _settings_under(url: str) -> dict[str, object]:
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'broker': s.CELERY_BROKER_URL, 'options': s.CELERY_BROKER_TRANSPORT_OPTIONS, "
        "'cache': s.CACHES['default']['LOCATION'], 'layer': s.CHANNEL_LAYERS['default']['CONFIG']['hosts']}))"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "REDIS_URL"}}
    proc = zygote.run_code(code, {**env, "DJANGO_SETTINGS_MODULE": "mcpsite.settings", "REDIS_URL": url})
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_settings_take_a_sentinel_url_as_naturally_as_a_redis_url() -> None:
    found = _settings_under(SENTINEL)
    assert found["broker"] == "sentinel://:secret@10.0.0.1:26379/4;sentinel://10.0.0.2:26380"
    assert found["options"] == {"master_name": "mcp", "sentinel_kwargs": {"password": "watch"}}
    assert found["cache"] == [SENTINEL]  # a list: Django would split a string at the sentinels' commas
    assert found["layer"] == [SENTINEL]
    plain = _settings_under("redis://127.0.0.1:6379/9")
    assert (plain["broker"], plain["options"]) == ("redis://127.0.0.1:6379/9", {})


def test_a_bad_redis_url_stops_the_process_with_the_form() -> None:
    code = "import django; django.setup()"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = zygote.run_code(
        code, {**env, "DJANGO_SETTINGS_MODULE": "mcpsite.settings", "REDIS_URL": "redis+sentinel://s1/"}
    )
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "/service[/db]" in proc.stderr.splitlines()[-1]
