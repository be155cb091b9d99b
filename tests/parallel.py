"""Each pytest-xdist worker gets resources of its own; loaded first (`-p tests.parallel`, pyproject's addopts).

It runs before pytest-django imports the settings, so the REDIS_URL a worker's settings read is already
its own: worker gwN takes Redis database (REDIS_URL's + N). Tenant ids repeat across the workers' test
databases (pytest-django names them test_<name>_gwN), so a shared Redis database would mix their quotas,
sessions and catalog versions. Everything else is per worker already: e2e databases, Celery queues and
ports are picked afresh by the fixtures, STATIC_ROOT by tests/e2e/conftest.py. Without xdist it does nothing.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # redis-server's default `databases`


def worker_index() -> int | None:
    """0, 1, ... under pytest-xdist (its worker ids are gw0, gw1, ...); None in a run without workers."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def redis_url_of_worker(url: str, index: int) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        raise ValueError("parallel tests need a redis:// REDIS_URL (a database number in its path)")
    database = int(parts.path.strip("/") or 0) + index
    if database >= REDIS_DATABASES:
        raise ValueError(
            f"REDIS_URL {url!r} leaves no Redis database for xdist worker gw{index}: "
            "use a lower database number or fewer workers"
        )
    return urlunsplit(parts._replace(path=f"/{database}"))


_index = worker_index()
RUN_REDIS_URL = "MCP_TEST_RUN_REDIS_URL"  # the run's own REDIS_URL, kept for tests/test_parallel.py
if _index is not None and os.environ.get("REDIS_URL"):
    os.environ.setdefault(RUN_REDIS_URL, os.environ["REDIS_URL"])
    os.environ["REDIS_URL"] = redis_url_of_worker(os.environ[RUN_REDIS_URL], _index)
