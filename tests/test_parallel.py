"""Each xdist worker's own Redis database (tests/parallel.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import parallel

ROOT = Path(__file__).resolve().parent.parent


def test_worker_n_takes_the_redis_database_n_above_the_configured_one() -> None:
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/9", 0) == "redis://127.0.0.1:6379/9"
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/9", 1) == "redis://127.0.0.1:6379/10"
    assert parallel.redis_url_of_worker("redis://:pw@host:6380", 2) == "redis://:pw@host:6380/2"


def test_a_worker_past_the_last_redis_database_is_refused_with_the_way_out() -> None:
    with pytest.raises(ValueError, match="fewer workers"):
        parallel.redis_url_of_worker("redis://127.0.0.1:6379/15", 1)
    with pytest.raises(ValueError, match="redis://"):
        parallel.redis_url_of_worker("unix:///run/redis.sock", 1)


def test_a_worker_process_reads_its_own_redis_database_in_its_settings() -> None:
    # As an xdist worker starts: the plugin is imported before Django's settings are read.
    code = (
        "import tests.parallel, django\n"
        "from django.conf import settings\n"
        "django.setup()\n"
        "print(settings.REDIS_URL)\n"
    )
    env = {
        **os.environ,
        "PYTEST_XDIST_WORKER": "gw2",
        "REDIS_URL": "redis://127.0.0.1:6379/7",
        "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
    }
    env.pop(parallel.RUN_REDIS_URL, None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "redis://127.0.0.1:6379/9"
