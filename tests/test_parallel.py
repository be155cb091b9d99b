"""Each xdist worker's own Redis database (tests/parallel.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

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
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "redis://127.0.0.1:6379/9"


def test_files_are_handed_out_longest_first_keeping_each_files_own_order() -> None:
    items = [
        SimpleNamespace(nodeid=n)
        for n in (
            "tests/a.py::one",
            "tests/a.py::two",
            "tests/slow/x.py::only",
            "tests/new.py::x",
            "tests/b.py::three",
        )
    ]
    seconds = {"tests/a.py": 0.5, "tests/slow/x.py": 40.0, "tests/b.py": 0.2}
    parallel.longest_files_first(items, seconds)
    assert [i.nodeid for i in items] == [
        "tests/slow/x.py::only",
        "tests/new.py::x",  # unrecorded: assumed a middling end-to-end file
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/b.py::three",
    ]


def test_a_packages_files_stay_together_so_its_servers_start_once_per_worker() -> None:
    items = [
        SimpleNamespace(nodeid=n)
        for n in (
            "tests/e2e/test_a.py::t",
            "tests/e2e/test_b.py::t",
            "tests/api/test_big.py::t",
            "tests/e2e/test_c.py::t",
        )
    ]
    seconds = {
        "tests/e2e/test_a.py": 20.0,
        "tests/e2e/test_b.py": 10.0,
        "tests/e2e/test_c.py": 30.0,
        "tests/api/test_big.py": 50.0,
    }
    parallel.longest_files_first(items, seconds)
    assert [i.nodeid for i in items] == [
        "tests/e2e/test_c.py::t",
        "tests/e2e/test_a.py::t",
        "tests/e2e/test_b.py::t",
        "tests/api/test_big.py::t",
    ]


def test_recorded_seconds_are_summed_per_file_from_a_junit_report(tmp_path: Path, monkeypatch) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="tests.test_parallel" name="a" time="1.25"/>'
        '<testcase classname="tests.test_parallel" name="b" time="0.5"/>'
        '<testcase classname="tests.e2e.test_soak.TestSoak" name="c" time="30"/>'
        '<testcase classname="tests.gone" name="d" time="9"/>'
        "</testsuite></testsuites>"
    )
    monkeypatch.setattr(parallel, "DURATIONS", tmp_path / "tests" / "durations.json")
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "test_parallel.py").touch()
    (tmp_path / "tests" / "e2e" / "test_soak.py").touch()
    assert parallel.record(str(report)) == {"tests/e2e/test_soak.py": 30.0, "tests/test_parallel.py": 1.8}
    assert parallel.file_seconds() == {"tests/e2e/test_soak.py": 30.0, "tests/test_parallel.py": 1.8}


def test_the_summary_names_the_packages_by_their_total_and_the_slowest_files() -> None:
    text = parallel.summary(
        {"tests/e2e/test_a.py": 30.0, "tests/e2e/test_b.py": 5.0, "tests/api/test_c.py": 20.0}, top=2
    )
    lines = text.splitlines()
    assert lines[0] == "55 worker-seconds in 3 files; by package:"
    assert lines[1].split() == ["35.0", "s", "tests/e2e"] and lines[2].split() == ["20.0", "s", "tests/api"]
    assert lines[3] == "slowest 2 files:"
    assert [line.split()[-1] for line in lines[4:]] == ["tests/e2e/test_a.py", "tests/api/test_c.py"]


def test_a_recording_of_the_files_seconds_is_checked_in() -> None:
    seconds = parallel.file_seconds()
    assert len(seconds) > 100, "tests/durations.json is missing: python -m tests.parallel junit.xml"
