"""A worker killed mid-run (kill -9) never leaves its caller waiting: the run is lost, the caller told.

A Daphne and a Celery worker of their own, on a queue of their own, so killing this worker touches no
other test. The bound: MCP_BACKGROUND_LIVENESS_SECONDS (3 s here) after the worker's last sign of life.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import anyio
import pytest
from mcp import Client

from tests.e2e.helpers import REQUEST_SECONDS, Reports, wait_until
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell, start_celery_worker, start_daphne

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker"),
]

LIVENESS_SECONDS = 3


@pytest.fixture(scope="module")
def doomed(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DaphneServer, ServerProcess]]:
    env = {
        **e2e_env,
        "MCP_BACKGROUND_QUEUE": "mcp-doomed",
        "MCP_BACKGROUND_LIVENESS_SECONDS": str(LIVENESS_SECONDS),
    }
    log_dir = tmp_path_factory.mktemp("doomed")
    daphne = start_daphne("daphne-doomed", env, log_dir)
    worker = start_celery_worker("celery-doomed", env, log_dir)
    yield daphne, worker
    worker.stop()
    daphne.stop()


def run_status(env: dict[str, str]) -> str:
    out = django_shell(
        env,
        "from mcp_app.models import ToolRun\n"
        "run = ToolRun.objects.order_by('-id').first()\n"
        "print(run.status, '|', run.detail)\n",
    )
    return out.strip().splitlines()[-1]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_caller_learns_within_the_bound_that_the_worker_died_mid_run(
    doomed: tuple[DaphneServer, ServerProcess], mode: str, request: pytest.FixtureRequest
) -> None:
    daphne, worker = doomed
    if worker.proc.poll() is not None:  # the other mode's run killed it: a new one on the same queue
        worker = start_celery_worker(f"celery-doomed-{mode}", {**daphne.env}, worker.log_path.parent)
        request.addfinalizer(worker.stop)
    reports = Reports()
    async with Client(
        daphne.mcp_url(), mode=mode, read_timeout_seconds=REQUEST_SECONDS, cache=None
    ) as client:
        async with anyio.create_task_group() as group:
            outcome: dict[str, object] = {}

            async def call() -> None:
                outcome["result"] = await client.call_tool(
                    "count_in_background", {"n": 50, "delay": 0.5}, progress_callback=reports.on_progress
                )
                outcome["at"] = time.monotonic()

            group.start_soon(call)
            await wait_until(lambda: len(reports.progress) >= 2, "progress from the worker")
            # The worker's pool children run the job: kill them and their parent, no goodbye.
            for child in _children(worker.proc.pid):
                os.kill(child, signal.SIGKILL)
            worker.proc.kill()
            killed_at = time.monotonic()
        result = outcome["result"]
    assert result.is_error
    assert "stopped answering" in result.content[0].text
    waited = outcome["at"] - killed_at  # type: ignore[operator]
    assert waited < LIVENESS_SECONDS + 2, waited  # the bound, plus a heartbeat period and scheduling
    status = run_status(daphne.env)
    assert status.startswith("lost |") and "no sign of life" in status
    # The platform goes on serving this client.
    async with Client(
        daphne.mcp_url(), mode=mode, read_timeout_seconds=REQUEST_SECONDS, cache=None
    ) as client:
        echoed = await client.call_tool("echo", {"message": "still here"})
    assert echoed.structured_content == {"echo": "still here"}


def _children(pid: int) -> list[int]:
    """The worker's prefork children (they run the jobs), from /proc."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children
