"""One tenant's hostile template does not stall another tenant (AMB-98), on a real Daphne.

Before: the issue's template (four nested loops) rendered for 6.8-17.5 s on Daphne's event loop and
every other tenant's call waited that long. Now its renders run in render processes: the other
tenant's calls, through the official SDK client, keep their idle latency.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time

import pytest

from tests.e2e.helpers import greet_latencies as latencies
from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell
from tests.handlers.test_template_budget import NESTED_LOOPS

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

HOSTILE_TIMEOUT = 3


def two_tenants(server: DaphneServer) -> tuple[str, str]:
    """A tenant with the hostile template tool and another with a template tool of its own."""
    hostile, other = f"hostile-{secrets.token_hex(3)}", f"other-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public')\n"
        f"o = Tenant.objects.create(slug={other!r}, name={other!r}, auth_mode='public')\n"
        f"Tool.objects.create(tenant=h, name='loops', handler='template', handler_config={{'text': {NESTED_LOOPS!r}}},"
        f" timeout_seconds={HOSTILE_TIMEOUT})\n"
        "Tool.objects.create(tenant=o, name='greet', handler='template',"
        " handler_config={'text': 'Hello, {{ name }}!'})\n",
    )
    return hostile, other


async def test_a_hostile_template_neither_stalls_another_tenant_nor_outlives_its_timeout(
    server: DaphneServer,
) -> None:
    hostile, other = two_tenants(server)
    idle = statistics.median(await latencies(server.mcp_url(other), 40))

    hostile_ends: list[float] = []
    stop = asyncio.Event()

    async def attack() -> None:
        async with mcp_client(server.mcp_url(hostile)) as client:  # legacy mode: a session
            while not stop.is_set():
                started = time.perf_counter()
                result = await client.call_tool("loops", {})
                hostile_ends.append(time.perf_counter() - started)
                assert result.is_error
                assert result.content[0].text in {
                    f"The tool did not finish within {HOSTILE_TIMEOUT} seconds.",
                    "The rendered text is longer than 1048576 characters; rendering was stopped.",
                }

    attackers = [asyncio.create_task(attack()) for _ in range(2)]
    await asyncio.sleep(1.0)  # both hostile calls are rendering
    during = statistics.median(await latencies(server.mcp_url(other), 40))
    stop.set()
    await asyncio.gather(*attackers)

    # Each hostile call ended by its own timeout (or the output cap): within twice the timeout, a ratio
    # of the deadline under test rather than a margin in seconds a busy machine can exceed.
    assert hostile_ends and max(hostile_ends) < 2 * HOSTILE_TIMEOUT, hostile_ends
    # The other tenant's median stays within 2x its idle median (a floor of 10 ms for a noisy machine).
    assert during <= 2 * max(idle, 0.010), f"idle p50 {idle * 1000:.1f} ms, during {during * 1000:.1f} ms"


@pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker")
async def test_templates_render_in_render_processes_of_a_celery_worker_too(
    server: DaphneServer, celery_worker: ServerProcess
) -> None:
    slug = f"worker-{secrets.token_hex(3)}"
    pairs = "{% for a in s %}{% for b in s %}{{ a }}{{ b }}{% endfor %}{% endfor %}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"Tool.objects.create(tenant=t, name='pairs', handler='template', handler_config={{'text': {pairs!r}}},"
        " execution='background', timeout_seconds=30)\n"
        f"Tool.objects.create(tenant=t, name='loops', handler='template', handler_config={{'text': {NESTED_LOOPS!r}}},"
        f" execution='background', timeout_seconds={HOSTILE_TIMEOUT})\n",
    )
    letters = "abcdefghijklmnopqrst" * 10  # 200² pairs: 80,000 characters, past the inline budget
    finished_before = celery_worker.read_log().count("(tool pairs) finished")
    async with mcp_client(server.mcp_url(slug)) as client:
        result = await client.call_tool("pairs", {"s": letters})
        assert not result.is_error, result
        assert result.content[0].text == "".join(a + b for a in letters for b in letters)
        started = time.perf_counter()
        hostile = await client.call_tool("loops", {})
        assert hostile.is_error
        assert time.perf_counter() - started < 2 * HOSTILE_TIMEOUT + 1
    assert celery_worker.read_log().count("(tool pairs) finished") > finished_before  # ran on the worker
