"""Each xdist worker's own Redis database (tests/parallel.py)."""

from __future__ import annotations

import os

import pytest

from tests import parallel


def test_worker_n_takes_the_redis_database_n_above_the_configured_one() -> None:
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/9", 0) == "redis://127.0.0.1:6379/9"
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/9", 1) == "redis://127.0.0.1:6379/10"
    assert parallel.redis_url_of_worker("redis://:pw@host:6380", 2) == "redis://:pw@host:6380/2"


def test_a_worker_past_the_last_redis_database_is_refused_with_the_way_out() -> None:
    with pytest.raises(ValueError, match="fewer workers"):
        parallel.redis_url_of_worker("redis://127.0.0.1:6379/15", 1)
    with pytest.raises(ValueError, match="redis://"):
        parallel.redis_url_of_worker("unix:///run/redis.sock", 1)


def test_a_worker_serves_its_own_redis_database(settings) -> None:  # noqa: ANN001
    index = parallel.worker_index()
    if index is None or not settings.REDIS_URL:
        pytest.skip("needs a run with xdist workers and REDIS_URL (CI's): nothing to share otherwise")
    assert parallel.redis_url_of_worker(os.environ[parallel.RUN_REDIS_URL], index) == settings.REDIS_URL
