"""One tenant's upstream that hangs or floods does not slow another tenant, on a real Daphne.

A hostile tenant publishes a real SDK upstream's `hang` (never answers, cut by its upstream's
timeout) or `slow_count` with a 1 ms delay (a progress and a log message per step: over a thousand a
second, twenty times the budget's rate, and bounded, so the upstream's own work stops by itself).
While its clients keep four such calls going, from a process of their own, another tenant's calls
through the official SDK client keep their idle latency (the same bound as
tests/e2e/test_hostile_template.py). Each hanging call ends at its upstream's timeout, and each
flooded call past its message budget, with an error naming the upstream (AMB-187, AMB-188).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import pytest

from tests.e2e import hostile_clients
from tests.e2e.helpers import sdk_client
from tests.e2e.hostile_clients import other_tenants_latency_while, within_twice_idle
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import STALL, UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

HANG_TIMEOUT = 3
# A flooded call ends at its message budget, long before this: a loaded machine that parses the flood
# slowly must not see the call end at its timeout instead.
FLOOD_TIMEOUT = 10


@pytest.fixture(scope="module", params=[False, True], ids=["stateful-upstream", "stateless-upstream"])
def remote(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UpstreamServer]:
    with running_upstream(tmp_path_factory.mktemp("upstream"), stateless=request.param) as server:
        yield server


def two_tenants(
    server: DaphneServer, url: str, remote_tool: str, extras: bool = False, timeout: int = HANG_TIMEOUT
) -> tuple[str, str]:
    """A tenant publishing the upstream's `remote_tool` (``extras``: its prompts and resources too), and
    another with a template tool."""
    hostile, other = f"hang-{secrets.token_hex(3)}", f"quiet-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public')\n"
        f"o = Tenant.objects.create(slug={other!r}, name={other!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=h, name='docs', url={url!r}, prefix='docs_', timeout_seconds={timeout},"
        f" publish_prompts={extras!r}, publish_resources={extras!r})\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        f"service.publish(UpstreamTool.objects.get(upstream=up, remote_name={remote_tool!r}))\n"
        "Tool.objects.create(tenant=o, name='greet', handler='template',"
        " handler_config={'text': 'Hello, {{ name }}!'})\n",
    )
    return hostile, other


def ended_by_its_timeout(seconds: float, timeout: float) -> bool:
    """A hanging call ended by its timeout, not by the test's end: within twice the timeout. A ratio of
    the deadline under test, never a fixed margin in seconds (a busy machine saw 4.99 s for a 3 s
    timeout against a margin of 1.5 s, issue 32)."""
    return timeout <= seconds + 0.05 and seconds < 2 * timeout


async def test_an_upstream_that_hangs_slows_no_other_tenant(
    server: DaphneServer, remote: UpstreamServer
) -> None:
    hostile, other = await asyncio.to_thread(two_tenants, server, remote.url, "hang")
    idle, during, hung = await other_tenants_latency_while(server, other, hostile, "docs_hang", {}, 0)

    assert len(hung) >= hostile_clients.CALLERS
    for seconds, text in hung:
        assert text == (
            f"Upstream 'docs': Upstream 127.0.0.1:{remote.port} did not answer the call within {HANG_TIMEOUT} seconds."
        )
        assert ended_by_its_timeout(seconds, HANG_TIMEOUT), hung
    within_twice_idle(idle, during)


async def test_an_upstream_that_floods_its_calls_slows_no_other_tenant(
    server: DaphneServer, remote: UpstreamServer
) -> None:
    hostile, other = await asyncio.to_thread(
        two_tenants, server, remote.url, "slow_count", False, FLOOD_TIMEOUT
    )
    # A pause between a caller's calls: the flood under test is the upstream's, not these clients' own
    # calls (a client's request rate is the tenant's quotas' to bound).
    label = f"Upstream 127.0.0.1:{remote.port}"
    flooded = f"Upstream 'docs': {label} sent this call more than 200 messages at once (then 50 a second)"
    paused = f"Upstream 'docs': {label} is unavailable; retry after "
    for attempt in range(2):
        idle, during, ended = await other_tenants_latency_while(
            server, other, hostile, "docs_slow_count", {"n": 3_000, "delay": 0.001}, 0.2
        )
        texts = [text for _, text in ended]
        # The budget trips on messages read: a CI machine loaded by the other test workers has read
        # fewer than 50 a second past the burst, and every call ran into its 10 s timeout. Measured
        # again once; a missing budget fails both (every call times out, or the other tenant slows).
        if any(text.startswith(flooded) for text in texts) or attempt == 1:
            break
        await asyncio.sleep(FLOOD_TIMEOUT)  # the breaker's pause, if any, is over
    assert any(text.startswith(flooded) for text in texts), texts[:5]
    assert all(text.startswith((flooded, paused)) for text in texts), texts[:5]
    within_twice_idle(idle, during)


@pytest.mark.parametrize("what", ["prompt", "resource"])
async def test_an_upstream_whose_prompt_or_resource_hangs_slows_no_other_tenant(
    server: DaphneServer, remote: UpstreamServer, what: str
) -> None:
    """prompts/get and resources/read of a published upstream prompt or template go through the same
    deadline: they end at the upstream's timeout with an error naming it, the other tenant unslowed."""
    hostile, other = await asyncio.to_thread(two_tenants, server, remote.url, "echo", True)
    if what == "prompt":
        target, arguments = "prompt:docs_greet", {"name": STALL}
    else:
        async with sdk_client(server.mcp_url(hostile), "auto") as client:
            [template] = [
                t for t in (await client.list_resource_templates()).resource_templates if t.name == "page"
            ]
        target, arguments = "resource:" + template.uri_template.replace("{page}", STALL), {}
    idle, during, hung = await other_tenants_latency_while(server, other, hostile, target, arguments, 0)

    assert len(hung) >= hostile_clients.CALLERS
    for seconds, text in hung:
        assert text == (
            f"Upstream 'docs': Upstream 127.0.0.1:{remote.port} did not answer the {'prompt' if what == 'prompt' else 'read'} within {HANG_TIMEOUT} seconds."
        ), hung
        assert ended_by_its_timeout(seconds, HANG_TIMEOUT), hung
    within_twice_idle(idle, during)
