"""The demo's tools for the last conformance scenarios, through Daphne (AMB-284..286), from data alone:
http tools whose endpoints (this platform's own /demo/ask-together, /demo/ask-then-task, /demo/fail)
stream their questions, their protocol error, and the end of their questions.

- `ask_everything`: one NDJSON line asks a form, the client's model and its roots: one round of three
  inputRequests on 2026-07-28 (`input-required-result-multiple-input-requests`), one question after
  another on a legacy session; the official SDK client answers them in both modes.
- `fail_on_purpose`: its endpoint's `error` event is the call's JSON-RPC error, and a task running it
  ends `failed` with that error in both eras (`sep-2663-tasks-get-status-failed`).
- `greet_in_a_task`: its question is asked in rounds before the 2026-07-28 task is made, and the task's
  result has the answer (`tasks-mrtr-composition`); the SDK (no tasks API) gets a plain call.

The SDK client (mcp 2.3) has no task API, so the tasks are driven on the wire with httpx, as in
test_tasks.py. Background tools: on the Celery worker with Redis, in Daphne without.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import MCPError
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

from tests.e2e.helpers import MCP_HEADERS, REQUEST_SECONDS, open_legacy_session, rpc_reply, sdk_client
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.usefixtures("worker_if_any"),
]

TASKS = "io.modelcontextprotocol/tasks"
PATHS = {
    "ask_everything": "/demo/ask-together",
    "greet_in_a_task": "/demo/ask-then-task",
    "fail_on_purpose": "/demo/fail",
}
TERMINAL = ("completed", "failed", "cancelled")
_ids = itertools.count(1000)


@pytest.fixture(scope="module")
def demo_tools(server: DaphneServer, worker_if_any: ServerProcess | None) -> Iterator[None]:
    """The seeded tools as bin/serve leaves them: posting to this platform's own endpoints (the e2e
    database was seeded before this server's port was known). With Redis the call below is queued for
    the worker: without it running (this module's first test had not started it yet), the call waited
    for nobody, and this set-up failed whenever no earlier module of the worker had started it."""
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        f"for name, path in {PATHS!r}.items():\n"
        "    tool = Tool.objects.get(tenant__slug='demo', name=name)\n"
        f"    tool.handler_config = {{**tool.handler_config, 'url': {server.url!r} + path}}\n"
        "    tool.save()\n",
    )
    # Listed all along: wait until a call reaches this server's endpoint (a JSON-RPC error), not the
    # seeded URL (a tool error) that a catalog cached before the edit still serves until its recheck.
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "fail_on_purpose", "arguments": {}, "_meta": modern_meta({})},
    }
    headers = {
        **MCP_HEADERS,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "fail_on_purpose",
    }
    # A loaded CI machine has taken over 10 s for the first call (the worker's first task, the
    # server calling itself), so a slow answer is waited out like a stale one, within the deadline.
    deadline = time.monotonic() + 60
    answer: Any = None
    while True:
        try:
            answer = httpx.post(
                server.mcp_url("demo"), json=body, headers=headers, timeout=REQUEST_SECONDS
            ).json()
        except httpx.TimeoutException as slow:
            answer = repr(slow)
        if isinstance(answer, dict) and "error" in answer:
            break
        assert time.monotonic() < deadline, f"the edited URLs were not served within 60 s: {answer}"
        time.sleep(0.2)
    yield


async def fill_in(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


async def model(context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text="Good day!"), model="m"
    )


async def share_roots(context: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///home/ada/project", name="project")])


def modern_meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e-raw", "version": "1.0"},
    }


class Wire:
    """Raw JSON-RPC over httpx: 2026-07-28 requests with their headers, or a legacy session's."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> None:
        self.http, self.url, self.headers = http, url, headers

    async def __call__(
        self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        request_id = next(_ids)
        if self.headers is not None:
            headers = self.headers
        else:
            named = params.get("name", params.get("taskId"))
            headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": method,
                **({"Mcp-Name": named} if named is not None else {}),
            }
            params = {**params, "_meta": meta or {}}
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return rpc_reply(await self.http.post(self.url, headers=headers, json=body), request_id)

    async def terminal(self, task_id: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        for _ in range(int(REQUEST_SECONDS / 0.2)):
            reply = await self("tasks/get", {"taskId": task_id}, meta)
            task = reply["result"]
            if task["status"] in TERMINAL:
                return task
            await asyncio.sleep(0.2)
        raise AssertionError(f"task {task_id} never ended")


# --- input-required-result-multiple-input-requests (AMB-284) -------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_answers_a_form_its_model_and_its_roots_asked_together_by_an_endpoint(
    server: DaphneServer, demo_tools: None, mode: str
) -> None:
    asked: list[str] = []

    async def person(context: Any, params: Any) -> ElicitResult:
        asked.append("form")
        return await fill_in(context, params)

    async def llm(context: Any, params: Any) -> CreateMessageResult:
        asked.append("model")
        return await model(context, params)

    async def roots(context: Any) -> ListRootsResult:
        asked.append("roots")
        return await share_roots(context)

    async with sdk_client(
        server.mcp_url("demo"),
        mode,
        elicitation_callback=person,
        sampling_callback=llm,
        list_roots_callback=roots,
    ) as client:
        result = await client.call_tool("ask_everything", {})
    assert not result.is_error, result.content
    assert result.structured_content == {
        "name": "Ada",
        "greeting": "Good day!",
        "roots": ["file:///home/ada/project"],
    }
    assert result.content[0].text.startswith("Hello, Ada! Your model's greeting: Good day!")
    # Legacy: one after another, in the line's order; 2026-07-28: all three in the first round.
    assert sorted(asked) == ["form", "model", "roots"]
    if mode == "legacy":
        assert asked == ["form", "model", "roots"]


async def test_on_2026_07_28_the_three_questions_are_one_input_required_result_and_the_retry_completes(
    server: DaphneServer, demo_tools: None
) -> None:
    meta = modern_meta({"elicitation": {}, "sampling": {}, "roots": {}})
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        wire = Wire(http, server.mcp_url("demo"))
        call = {"name": "ask_everything", "arguments": {}}
        first = (await wire("tools/call", call, meta))["result"]
        assert first["resultType"] == "input_required" and first["requestState"]
        assert {key: r["method"] for key, r in first["inputRequests"].items()} == {
            "user_name": "elicitation/create",
            "greeting": "sampling/createMessage",
            "client_roots": "roots/list",
        }
        answers = {
            "user_name": {"action": "accept", "content": {"name": "Alice"}},
            "greeting": {
                "role": "assistant",
                "content": {"type": "text", "text": "Hello there!"},
                "model": "m",
            },
            "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
        }
        retry = {**call, "requestState": first["requestState"], "inputResponses": answers}
        second = (await wire("tools/call", retry, meta))["result"]
    assert second["resultType"] == "complete"
    assert second["structuredContent"] == {
        "name": "Alice",
        "greeting": "Hello there!",
        "roots": ["file:///test/root"],
    }


# --- sep-2663-tasks-get-status-failed (AMB-285) --------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_plain_call_of_a_tool_whose_endpoint_fails_at_the_protocol_level_gets_the_json_rpc_error(
    server: DaphneServer, demo_tools: None, mode: str
) -> None:
    async with sdk_client(server.mcp_url("demo"), mode) as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("fail_on_purpose", {})
    assert failed.value.code == -32603
    assert failed.value.message.startswith("The demo endpoint failed on purpose")


async def test_a_2025_11_25_task_of_the_failing_tool_ends_failed_and_its_result_is_the_error(
    server: DaphneServer, demo_tools: None
) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        wire = Wire(http, server.mcp_url("demo"), await open_legacy_session(http, server.mcp_url("demo")))
        created = (await wire("tools/call", {"name": "fail_on_purpose", "arguments": {}, "task": {}}))[
            "result"
        ]
        task = await wire.terminal(created["task"]["taskId"])
        assert task["status"] == "failed" and task["statusMessage"].startswith("The demo endpoint failed")
        fetched = await wire("tasks/result", {"taskId": task["taskId"]})
    assert fetched["error"]["code"] == -32603 and "result" not in fetched


async def test_a_2026_07_28_task_of_the_failing_tool_is_failed_with_an_inlined_error_and_no_result(
    server: DaphneServer, demo_tools: None
) -> None:
    meta = modern_meta({"extensions": {TASKS: {}}})
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        wire = Wire(http, server.mcp_url("demo"))
        created = (await wire("tools/call", {"name": "fail_on_purpose", "arguments": {}}, meta))["result"]
        assert created["resultType"] == "task"
        task = await wire.terminal(created["taskId"], meta)
    assert task["status"] == "failed" and "result" not in task
    assert task["error"]["code"] == -32603 and task["error"]["message"].startswith("The demo endpoint failed")


# --- tasks-mrtr-composition (AMB-286) -------------------------------------------------------------------


async def test_a_task_tools_question_is_asked_in_a_round_before_the_task_and_the_task_greets_by_the_answer(
    server: DaphneServer, demo_tools: None
) -> None:
    meta = modern_meta({"elicitation": {}, "extensions": {TASKS: {}}})
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        wire = Wire(http, server.mcp_url("demo"))
        call = {"name": "greet_in_a_task", "arguments": {}}
        first = (await wire("tools/call", call, meta))["result"]
        assert first["resultType"] == "input_required" and "taskId" not in first
        [(key, question)] = first["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        answer = {"action": "accept", "content": {"name": "Alice"}}
        retry = {**call, "requestState": first["requestState"], "inputResponses": {key: answer}}
        created = (await wire("tools/call", retry, meta))["result"]
        assert created["resultType"] == "task" and created["taskId"]
        assert "requestState" not in created and "inputRequests" not in created
        task = await wire.terminal(created["taskId"], meta)
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "Hello, Alice! This greeting took 3 steps."


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_tasks_gets_the_same_tool_as_a_plain_call_that_asks(
    server: DaphneServer, demo_tools: None, mode: str
) -> None:
    async with sdk_client(server.mcp_url("demo"), mode, elicitation_callback=fill_in) as client:
        result = await client.call_tool("greet_in_a_task", {})
    assert not result.is_error, result.content
    assert result.content[0].text == "Hello, Ada! This greeting took 3 steps."
