"""An upstream tool that runs as a task on its upstream, through our Daphne (AMB-199..201).

The upstream is the SDK's server with `long_job`, which it runs only as a task (tests/upstreams/
task_server.py), stateful (the tenant's Upstream in legacy mode: a 2025-11-25 session upstream) and
stateless (mode auto: 2026-07-28 upstream). Our client is the official SDK client in mode "legacy" and
"auto": a plain call completes with the job's result, a cancelled one cancels the upstream task, and a
task-augmented call gets our own task (our id, never the upstream's), polled and cancelled through us.
The SDK client has no task API (mcp 2.3: task types only), so `raw` sends the task requests through its
session's stamp and dispatcher, as a task-aware client would put them on the wire.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import REQUEST_SECONDS, sdk_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")
EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
TERMINAL = ("completed", "failed", "cancelled")


@pytest.fixture(params=["legacy", "auto"], ids=["2025-11-25-upstream", "2026-07-28-upstream"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[UpstreamServer, str]]:
    """The upstream and the mode our Upstream row reaches it in: a stateful server as a legacy
    session, a stateless one in 2026-07-28."""
    with running_upstream(tmp_path, stateless=request.param == "auto") as server:
        yield server, request.param


def task_tenant(env: dict[str, str], url: str, mode: str) -> str:
    """A tenant publishing the upstream's long_job as docs_long_job; its slug."""
    slug = f"tasks-{secrets.token_hex(3)}"
    django_shell(
        env,
        "from mcp_app.models import Upstream, UpstreamTool\n"
        "from mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='docs', url={url!r}, prefix='docs_', mode={mode!r}, timeout_seconds=20)\n"
        "up.full_clean(); up.save()\n"
        "service.sync(up)\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='long_job'))\n",
    )
    return slug


async def raw(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One request as the SDK client stamps it, its raw result; a 2026-07-28 one declares the tasks extension."""
    session = client.session
    data: dict[str, Any] = {"method": method, "params": dict(params)}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)
    meta = data["params"].get("_meta")
    if isinstance(meta, dict) and CAPABILITIES in meta:  # 2026-07-28
        meta[CAPABILITIES] = {**meta[CAPABILITIES], "extensions": {EXTENSION: {}}}
        if "taskId" in params:
            opts.setdefault("headers", {})["mcp-name"] = params["taskId"]
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


async def wait_for(server: UpstreamServer, key: str, value: Any) -> None:
    async with asyncio.timeout(REQUEST_SECONDS):
        while value not in server.stats()[key]:
            await asyncio.sleep(0.05)


async def wait_for_tasks(server: UpstreamServer, more_than: int) -> None:
    async with asyncio.timeout(REQUEST_SECONDS):
        while server.stats()["tasks"] <= more_than:
            await asyncio.sleep(0.05)


async def test_an_upstream_task_tool_called_through_us_completes_with_its_result(
    server: DaphneServer, e2e_env: dict[str, str], remote: tuple[UpstreamServer, str]
) -> None:
    upstream, upstream_mode = remote
    slug = await asyncio.to_thread(task_tenant, e2e_env, upstream.url, upstream_mode)
    for mode in MODES:
        run = f"plain-{mode}"
        async with sdk_client(server.mcp_url(slug), mode) as client:
            tool = {t.name: t for t in (await client.list_tools()).tools}["docs_long_job"]
            result = await client.call_tool("docs_long_job", {"steps": 3, "delay": 0.05, "run": run})
        assert result.content[0].text == "job done after 3 steps" and not result.is_error, mode
        if mode == "legacy":  # 2025-11-25 lists it: we run it plainly or as our task, as our client likes
            assert tool.execution is not None and tool.execution.task_support == "optional"
        assert run in upstream.stats()["completed"], mode
    stats = upstream.stats()
    assert stats["tasks"] == 2 and stats["federated"].get("tasks/get", 0) >= 2
    # Called as a task at once, by its pin: no plain call refused first (AMB-199's fallback).
    assert stats["federated"]["tools/call"] == 2


async def test_cancelling_through_us_cancels_the_upstream_task(
    server: DaphneServer, e2e_env: dict[str, str], remote: tuple[UpstreamServer, str]
) -> None:
    upstream, upstream_mode = remote
    slug = await asyncio.to_thread(task_tenant, e2e_env, upstream.url, upstream_mode)
    for mode in MODES:
        run = f"cancel-{mode}"
        before = upstream.stats()["tasks"]
        async with sdk_client(server.mcp_url(slug), mode) as client:
            call = asyncio.create_task(
                client.call_tool("docs_long_job", {"steps": 600, "delay": 0.05, "run": run})
            )
            await wait_for_tasks(upstream, before)
            call.cancel()  # legacy: notifications/cancelled; 2026-07-28: the request is dropped
            with pytest.raises(asyncio.CancelledError):
                await call
        await wait_for(upstream, "cancelled", run)
        assert run not in upstream.stats()["completed"], mode
    assert upstream.stats()["federated"].get("tasks/cancel", 0) == 2


async def create_task(client: Any, run: str, steps: int) -> str:
    """A task-augmented call of docs_long_job by our client (legacy: params.task; 2026-07-28: the
    extension declared); the id of the task we answer with, which must be ours."""
    legacy = client.session.protocol_version == "2025-11-25"
    params = {"name": "docs_long_job", "arguments": {"steps": steps, "delay": 0.05, "run": run}}
    created = await raw(client, "tools/call", {**params, **({"task": {"ttl": 60_000}} if legacy else {})})
    task = created["task"] if legacy else created
    assert legacy or created["resultType"] == "task", created
    assert task["status"] == "working" and not task["taskId"].startswith("up-"), task  # ours, not upstream's
    return task["taskId"]


async def test_a_task_augmented_call_by_our_client_gets_our_task_polled_and_cancelled_through_us(
    server: DaphneServer, e2e_env: dict[str, str], remote: tuple[UpstreamServer, str]
) -> None:
    upstream, upstream_mode = remote
    slug = await asyncio.to_thread(task_tenant, e2e_env, upstream.url, upstream_mode)
    for mode in MODES:
        async with sdk_client(server.mcp_url(slug), mode) as client:
            legacy = client.session.protocol_version == "2025-11-25"
            task_id = await create_task(client, f"ours-{mode}", 3)
            async with asyncio.timeout(REQUEST_SECONDS):
                while (got := await raw(client, "tasks/get", {"taskId": task_id}))["status"] not in TERMINAL:
                    await asyncio.sleep(got.get("pollInterval", got.get("pollIntervalMs", 200)) / 1000)
            assert got["status"] == "completed", got
            result = await raw(client, "tasks/result", {"taskId": task_id}) if legacy else got["result"]
            assert result["content"][0]["text"] == "job done after 3 steps", mode
            assert f"ours-{mode}" in upstream.stats()["completed"]

            before = upstream.stats()["tasks"]
            task_id = await create_task(client, f"ours-cancel-{mode}", 600)
            await wait_for_tasks(upstream, before)
            await raw(client, "tasks/cancel", {"taskId": task_id})
            await wait_for(upstream, "cancelled", f"ours-cancel-{mode}")
            assert (await raw(client, "tasks/get", {"taskId": task_id}))["status"] == "cancelled", mode
