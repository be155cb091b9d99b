"""One process of the deployment listens to an upstream (AMB-182): two Daphnes on one Redis, one lease;
the holder drains (SIGTERM) and gives it up, and the other listens within a rescan, long before the lease
would lapse. With Redis only: without it each process is a deployment of its own."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from django.conf import settings

from tests.e2e.servers import DaphneServer, django_shell, start_daphne
from tests.upstreams.conftest import modern_upstream  # noqa: F401
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.services]
WAIT = 20.0


@pytest.fixture
def remote(request: pytest.FixtureRequest) -> UpstreamServer:
    return request.getfixturevalue("modern_upstream")


def listens(server: UpstreamServer) -> int:
    return server.stats()["methods"].get("subscriptions/listen", 0)


def holder_pid(upstream_id: int) -> int | None:
    value = redis.Redis.from_url(settings.REDIS_URL).get(f"mcp:lease:upstream-watch:{upstream_id}")
    return int(value.decode().split(":")[1]) if value else None


async def test_one_of_two_processes_listens_and_the_other_takes_over_when_it_drains(
    e2e_env: dict[str, str], remote: UpstreamServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The default 30 s lease: a takeover within seconds is the drain's release, not a lapse.
    env = {**e2e_env, "MCP_UPSTREAM_WATCH": "1", "MCP_UPSTREAM_WATCH_RESCAN_SECONDS": "1"}
    servers: list[DaphneServer] = [
        await asyncio.to_thread(start_daphne, f"daphne-lease-{n}", env, tmp_path_factory.mktemp(f"lease-{n}"))
        for n in "ab"
    ]
    try:
        before = listens(remote)
        out = await asyncio.to_thread(
            django_shell,
            e2e_env,
            "from mcp_app.models import Upstream\nfrom tenants.models import Tenant\n"
            "tenant = Tenant.objects.create(slug='lease', name='lease', auth_mode='public')\n"
            f"up = Upstream(tenant=tenant, name='docs', url={remote.url!r}, prefix='docs_')\n"
            "up.full_clean(); up.save(); print(up.pk)\n",
        )
        upstream_id = int(out.strip().splitlines()[-1])
        deadline = time.monotonic() + WAIT
        while listens(remote) < before + 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(3)  # three rescans of each process
        assert listens(remote) == before + 1

        pids = {server.proc.pid: server for server in servers}
        holder = pids[holder_pid(upstream_id)]
        other = next(server for server in servers if server is not holder)
        await asyncio.to_thread(holder.stop)
        deadline = time.monotonic() + 10
        while listens(remote) < before + 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert listens(remote) == before + 2
        assert holder_pid(upstream_id) == other.proc.pid
    finally:
        for server in servers:
            await asyncio.to_thread(server.stop)
