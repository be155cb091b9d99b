"""Tasks (AMB-47) through Daphne with a real Celery worker: the seeded `count_in_background` tool.

The SDK client (mcp 2.3) has no task API in either era, so these drive the wire with raw httpx.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.e2e.helpers import REQUEST_SECONDS, open_legacy_session, rpc_reply, wait_until_served
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker"),
]

TOOL = "count_in_background"
_ids = itertools.count(100)


async def rpc(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], method: str, params: dict[str, Any]
) -> dict[str, Any]:
    request_id = next(_ids)
    response = await http.post(
        url, headers=headers, json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    )
    return rpc_reply(response, request_id)


MODERN_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
}


def modern_caller(http: httpx.AsyncClient, url: str, meta: dict[str, Any]) -> Any:
    """A 2026-07-28 request with `meta`, its headers as the transport page wants them."""

    async def modern(method: str, params: dict[str, Any]) -> dict[str, Any]:
        # Mcp-Name mirrors what the request names: a tool, or a task (the tasks extension's routing header).
        named = params.get("name", params.get("taskId"))
        names = {"Mcp-Name": named} if named is not None else {}
        headers = {**MODERN_HEADERS, "Mcp-Method": method, **names}
        return await rpc(http, url, headers, method, {**params, "_meta": meta})

    return modern


def modern_meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e-raw", "version": "1.0"},
    }


async def test_a_2025_11_25_session_creates_polls_fetches_and_cancels_tasks_run_by_the_worker(
    server: DaphneServer, celery_worker: ServerProcess
) -> None:
    url = server.mcp_url()
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, url)
        other = await open_legacy_session(http, url)
        created = await rpc(
            http,
            url,
            headers,
            "tools/call",
            {"name": TOOL, "arguments": {"n": 2, "delay": 0.1}, "task": {"ttl": 60_000}},
        )
        task_id = created["result"]["task"]["taskId"]
        assert created["result"]["task"]["status"] == "working"
        result = await rpc(http, url, headers, "tasks/result", {"taskId": task_id})
        assert result["result"]["structuredContent"] == {"count": 2}
        polled = await rpc(http, url, headers, "tasks/get", {"taskId": task_id})
        assert polled["result"]["status"] == "completed"
        # Another (anonymous) session: exactly the answer of an unknown id.
        refused = await rpc(http, url, other, "tasks/get", {"taskId": task_id})
        assert refused["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}

        long = await rpc(
            http,
            url,
            headers,
            "tools/call",
            {"name": TOOL, "arguments": {"n": 50, "delay": 0.5}, "task": {}},
        )
        long_id = long["result"]["task"]["taskId"]
        await anyio.sleep(1.5)  # the worker has it
        cancelled = await rpc(http, url, headers, "tasks/cancel", {"taskId": long_id})
        assert cancelled["result"]["status"] == "cancelled"
        assert (await rpc(http, url, headers, "tasks/get", {"taskId": long_id}))["result"][
            "status"
        ] == "cancelled"
    with anyio.fail_after(10):
        while "cancelled" not in celery_worker.read_log().split(TOOL)[-1]:
            await anyio.sleep(0.2)


async def test_a_2026_07_28_request_with_the_extension_gets_a_task_the_worker_completes(
    server: DaphneServer, celery_worker: ServerProcess
) -> None:
    url = server.mcp_url()
    meta = modern_meta({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        modern = modern_caller(http, url, meta)

        created = await modern("tools/call", {"name": TOOL, "arguments": {"n": 2, "delay": 0.1}})
        assert created["result"]["resultType"] == "task", created
        task_id = created["result"]["taskId"]
        with anyio.fail_after(15):
            while (task := (await modern("tasks/get", {"taskId": task_id}))["result"])["status"] == "working":
                await anyio.sleep(0.2)
        assert task["status"] == "completed" and task["result"]["structuredContent"] == {"count": 2}


@pytest.fixture(scope="module")
def ask_in_background(server: DaphneServer) -> Iterator[str]:
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='task_asks', "
        "defaults=dict(handler='python', handler_config={'callable': 'ask_name'}, execution='background', "
        "timeout_seconds=60))\n",
    )
    wait_until_served(server.mcp_url(), "task_asks")
    yield "task_asks"
    django_shell(
        server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='task_asks').delete()\n"
    )


async def test_a_2026_07_28_task_on_the_worker_asks_and_goes_on_with_the_answer_tasks_update_brings(
    server: DaphneServer, celery_worker: ServerProcess, ask_in_background: str
) -> None:
    meta = modern_meta({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        modern = modern_caller(http, server.mcp_url(), meta)
        created = await modern("tools/call", {"name": ask_in_background, "arguments": {"question": "Who?"}})
        task_id = created["result"]["taskId"]
        with anyio.fail_after(15):
            while (task := (await modern("tasks/get", {"taskId": task_id}))["result"])["status"] == "working":
                await anyio.sleep(0.2)
        assert task["status"] == "input_required", task
        ((key, question),) = task["inputRequests"].items()
        assert question["params"]["message"] == "Who?"
        answer = {"action": "accept", "content": {"name": "Grace"}}
        await modern("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
        with anyio.fail_after(15):
            while (task := (await modern("tasks/get", {"taskId": task_id}))["result"])[
                "status"
            ] != "completed":
                await anyio.sleep(0.2)
    assert task["result"]["content"][0]["text"] == "Hello, Grace!"
