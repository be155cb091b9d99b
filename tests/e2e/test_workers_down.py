"""No worker alive (AMB-113, AMB-114): the web process stays ready and says the workers are down, the
gauge is 0, and a background call made with the official SDK (legacy and auto mode) is told it waits
for a worker, then completes once one starts, or ends in words at its tool's bound.

A Daphne of its own on a queue of its own, so no other test's worker counts, and the workers started
here take no other test's jobs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import wait_until
from tests.e2e.servers import DaphneServer, django_shell, start_celery_worker, start_daphne

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="background tools run on Celery workers, which need the Redis broker"),
]

SHORT_WAIT = 3  # the bound of `wait_short` (Tool.worker_wait_seconds)
CALL_SECONDS = 90.0  # a call that waits for a worker to start (a few seconds on a busy machine)


@pytest.fixture(scope="module")
def unattended(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaphneServer, str]]:
    """A Daphne whose queue no worker takes, and a tenant of its own with two background tools."""
    env = {**e2e_env, "MCP_BACKGROUND_QUEUE": f"mcp-unattended-{secrets.token_hex(4)}"}
    slug = f"unattended-{secrets.token_hex(3)}"
    django_shell(
        env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "schema = {'type': 'object', 'properties': {'n': {'type': 'integer'}, 'delay': {'type': 'number'}}}\n"
        "for name, wait in (('wait_long', 120), ('wait_short', " + str(SHORT_WAIT) + ")):\n"
        "    Tool.objects.create(tenant=tenant, name=name, input_schema=schema, handler='python',\n"
        "        handler_config={'callable': 'count_slowly'}, execution='background', worker_wait_seconds=wait)\n",
    )
    daphne = start_daphne("daphne-unattended", env, tmp_path_factory.mktemp("unattended"))
    yield daphne, slug
    daphne.stop()


def readiness(server: DaphneServer) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{server.url}/health/ready", headers={"accept": "application/json"}, timeout=10)
    return response.status_code, response.json()


def workers_gauge(server: DaphneServer) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    [sample] = families["mcp_background_workers"].samples
    assert sample.labels == {"queue": server.env["MCP_BACKGROUND_QUEUE"]}
    return sample.value


class Progress:
    """The progress notifications of one call, messages included."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []

    async def __call__(self, value: float, total: float | None, message: str | None) -> None:
        self.seen.append((value, message))

    def waiting(self) -> list[str]:
        return [m for _, m in self.seen if m and m.startswith("Waiting for a worker")]


def test_with_no_worker_alive_the_process_is_ready_and_says_the_workers_are_down(
    unattended: tuple[DaphneServer, str],
) -> None:
    daphne, _slug = unattended
    status, body = readiness(daphne)
    assert status == 200, body
    assert (body["workers"], body["workers_alive"]) == ("down", 0)
    assert {value for name, value in body.items() if not name.startswith(("workers", "upstreams"))} == {"OK"}
    assert workers_gauge(daphne) == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_waits_for_a_worker_saying_so_and_completes_when_one_starts(
    unattended: tuple[DaphneServer, str], mode: str, request: pytest.FixtureRequest
) -> None:
    daphne, slug = unattended
    assert readiness(daphne)[1]["workers"] == "down"
    progress = Progress()
    outcome: dict[str, Any] = {}
    async with (
        Client(daphne.mcp_url(slug), mode=mode, read_timeout_seconds=CALL_SECONDS, cache=None) as client,
        anyio.create_task_group() as group,
    ):

        async def call() -> None:
            outcome["result"] = await client.call_tool("wait_long", {"n": 2, "delay": 0.01}, progress_callback=progress)

        group.start_soon(call)
        await wait_until(progress.waiting, "the waiting notice")
        [notice] = progress.waiting()
        assert notice.startswith("Waiting for a worker: none is running.") and "120 s" in notice
        assert "result" not in outcome
        # The worker comes back (a redeploy ends): it takes the queued job.
        worker = await anyio.to_thread.run_sync(
            start_celery_worker, f"celery-unattended-{mode}", daphne.env, daphne.log_path.parent
        )
        request.addfinalizer(worker.stop)
    result = outcome["result"]
    assert not result.is_error, result
    assert result.structured_content == {"count": 2}
    assert [value for value, _ in progress.seen] == [0, 1, 2]
    status, body = readiness(daphne)
    assert (status, body["workers"], body["workers_alive"]) == (200, "up", 1)
    assert workers_gauge(daphne) == 1
    worker.stop()  # a warm shutdown: counted no more at once
    assert readiness(daphne)[1]["workers"] == "down"
    assert workers_gauge(daphne) == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_no_worker_starts_ends_in_words_at_its_tools_bound(
    unattended: tuple[DaphneServer, str], mode: str
) -> None:
    daphne, slug = unattended
    assert readiness(daphne)[1]["workers"] == "down"
    progress = Progress()
    async with Client(daphne.mcp_url(slug), mode=mode, read_timeout_seconds=CALL_SECONDS, cache=None) as client:
        started = time.monotonic()
        result = await client.call_tool("wait_short", {"n": 2, "delay": 0.01}, progress_callback=progress)
        waited = time.monotonic() - started
    assert result.is_error
    assert result.content[0].text == (
        f"No worker started tool 'wait_short' within {SHORT_WAIT} seconds. The workers are down or busy; "
        "the call did not run. Try again later."
    )
    assert SHORT_WAIT <= waited < SHORT_WAIT + 3, waited
    assert [m.split(".")[0] for m in progress.waiting()] == ["Waiting for a worker: none is running"]
    assert readiness(daphne)[0] == 200
