"""Each pytest-xdist worker gets resources of its own; loaded first (`-p tests.parallel`, pyproject's addopts).

It runs before pytest-django imports the settings, so the REDIS_URL a worker's settings read is already
its own: worker gwN takes Redis database (REDIS_URL's + N). Tenant ids repeat across the workers' test
databases (pytest-django names them test_<name>_gwN), so a shared Redis database would mix their quotas,
sessions and catalog versions. Everything else is per worker already: e2e databases, Celery queues and
ports are picked afresh by the fixtures; the e2e servers share one STATIC_ROOT, collected once under a
lock (tests/e2e/conftest.py). Without xdist it does nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

import pytest

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


# A developer's `.env` (written by bin/serve, read by the settings: AMB-297) must reach neither the tests nor
# the servers and commands they start: they inherit this environment. A test of the file names its own.
os.environ["MCP_ENV_FILE"] = ""

_index = worker_index()
RUN_REDIS_URL = "MCP_TEST_RUN_REDIS_URL"  # the run's own REDIS_URL, kept for tests/test_parallel.py
if _index is not None and os.environ.get("REDIS_URL"):
    os.environ.setdefault(RUN_REDIS_URL, os.environ["REDIS_URL"])
    os.environ["REDIS_URL"] = redis_url_of_worker(os.environ[RUN_REDIS_URL], _index)


# --- Longest files first --------------------------------------------------------------------------
# xdist hands out whole files (--dist loadfile); by default it starts with the files holding the most
# tests, so the end-to-end files (few tests, each starting servers) came last and one worker ran them
# alone while the others idled. bin/test passes --no-loadscope-reorder and this orders the files by
# the seconds they took in a recorded run (tests/durations.json; `python -m tests.parallel junit.xml`
# rewrites it from `pytest --junitxml`), longest first, a package's files together: the tail is then
# the shortest files.
DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_FILE_SECONDS = 5.0  # a file the recording has not seen yet: assume a middling end-to-end file


def file_seconds() -> dict[str, float]:
    """Seconds each test file took in the recorded run, by path from the repository root."""
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def longest_files_first(items: list[Any], seconds: dict[str, float]) -> None:
    """Sort test items (anything with a nodeid): the packages that took longest first, then within
    each its files that took longest. A package's files stay together, so a worker keeps the
    package-scoped servers of tests/e2e up across its files instead of starting them anew each time
    it comes back to the package."""
    first_seen: dict[str, int] = {}
    package_seconds: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path not in first_seen:
            first_seen[path] = len(first_seen)
            package = path.rpartition("/")[0]
            package_seconds[package] = package_seconds.get(package, 0.0) + seconds.get(
                path, UNKNOWN_FILE_SECONDS
            )

    def rank(item: Any) -> tuple[float, str, float, int]:
        path = item.nodeid.split("::", 1)[0]
        package = path.rpartition("/")[0]
        return (
            -package_seconds[package],
            package,
            -seconds.get(path, UNKNOWN_FILE_SECONDS),
            first_seen[path],
        )

    items.sort(key=rank)  # stable: a file's own tests keep their order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if worker_index() is not None:
        longest_files_first(items, file_seconds())


def per_file(junit_xml: str) -> dict[str, float]:
    """A junit report's test times summed per file (path from the repository root), rounded to 0.1 s."""
    totals: dict[str, float] = {}
    root = DURATIONS.parent.parent
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        parts = case.get("classname", "").split(".")  # tests.e2e.test_x, or tests.e2e.test_x.TestClass
        paths = ("/".join(parts[:n]) + ".py" for n in range(len(parts), 0, -1))
        path = next((p for p in paths if (root / p).is_file()), None)
        if path is not None:
            totals[path] = totals.get(path, 0.0) + float(case.get("time") or 0.0)
    return {path: round(s, 1) for path, s in sorted(totals.items())}


def record(junit_xml: str) -> dict[str, float]:
    """Write a junit report's seconds per file to tests/durations.json."""
    rounded = per_file(junit_xml)
    DURATIONS.write_text(json.dumps(rounded, indent=1) + "\n")
    return rounded


def summary(seconds: dict[str, float], top: int = 20) -> str:
    """The worker-seconds per package and the `top` slowest files, for the end of a CI run."""
    packages: dict[str, float] = {}
    for path, s in seconds.items():
        package = path.rpartition("/")[0]
        packages[package] = packages.get(package, 0.0) + s
    lines = [f"{sum(seconds.values()):.0f} worker-seconds in {len(seconds)} files; by package:"]
    lines += [f"{s:8.1f} s  {p}" for p, s in sorted(packages.items(), key=lambda kv: -kv[1])]
    lines.append(f"slowest {top} files:")
    lines += [f"{s:8.1f} s  {p}" for p, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    # `python -m tests.parallel junit.xml` re-records tests/durations.json; with --summary it only prints.
    if sys.argv[1] == "--summary":
        print(summary(per_file(sys.argv[2])))
    else:
        recorded = record(sys.argv[1])
        print(f"{len(recorded)} files, {sum(recorded.values()):.0f} s in all, written to {DURATIONS}")
