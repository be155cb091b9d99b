"""An upstream tool that runs as a background job on a real Celery worker: the worker's pool child
flushes the upstream's health to the database as a serving process does (AMB-185), so the admin's
view of the deployment counts the calls the workers made (before, only Daphne's were written)."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell
from tests.upstreams.servers import UpstreamServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

FLUSH_SECONDS = 1  # the shared worker's MCP_USAGE_FLUSH_SECONDS (tests/e2e/conftest.py)


def background_upstream_tool(env: dict[str, str], url: str) -> tuple[str, int]:
    """A tenant publishing the upstream's `echo` as docs_echo, run on a worker; its slug and upstream id."""
    slug = f"bgup-{secrets.token_hex(3)}"
    out = django_shell(
        env,
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='docs', url={url!r}, prefix='docs_', timeout_seconds=10)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='echo'))\n"
        "tool = Tool.objects.get(tenant=tenant, name='docs_echo')\n"
        "tool.execution = 'background'; tool.full_clean(); tool.save()\n"
        "print(up.pk)\n",
    )
    return slug, int(out.strip().splitlines()[-1])


def health_rows(env: dict[str, str], upstream_id: int) -> list[str]:
    out = django_shell(
        env,
        "from mcp_app.models import UpstreamHealth\n"
        f"for row in UpstreamHealth.objects.filter(upstream_id={upstream_id}):\n"
        "    print(row.calls)\n",
    )
    return out.split()


async def test_an_upstream_call_made_by_a_worker_job_reaches_the_deployments_health(
    server: DaphneServer, celery_worker: ServerProcess, modern_upstream: UpstreamServer
) -> None:
    slug, upstream_id = await asyncio.to_thread(background_upstream_tool, server.env, modern_upstream.url)
    async with sdk_client(server.mcp_url(slug), "auto") as client:
        result = await client.call_tool("docs_echo", {"message": "from a worker"})
    assert result.structured_content == {"echo": "from a worker"}
    assert "mcp_app.run_tool_job" in celery_worker.read_log()  # it ran on the worker, not in Daphne

    deadline = time.monotonic() + 10 * FLUSH_SECONDS + 5
    rows: list[str] = []
    while not rows and time.monotonic() < deadline:
        await asyncio.sleep(FLUSH_SECONDS / 2)
        rows = await asyncio.to_thread(health_rows, server.env, upstream_id)
    assert rows and sum(int(calls) for calls in rows) >= 1, "no health row for the worker's upstream call"
