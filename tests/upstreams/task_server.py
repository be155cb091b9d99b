"""Tasks on the test upstream, in both eras: the tool `long_job` runs only as a task.

The SDK 2.3 server has no tasks (its task types are types-only, and a legacy `tools/call` answer is
sieved as a CallToolResult), so a server middleware serves them on the wire, before the SDK's own
validation: a legacy session is told the `tasks` capability in its `initialize` result and
`execution.taskSupport: "required"` in the listing of `long_job`; a 2026-07-28 `server/discover` names
the `io.modelcontextprotocol/tasks` extension (the listing says "required" there too, as our own server
does). A call of `long_job` without a task (legacy: no `params.task`; 2026-07-28: the extension not in
the request's client capabilities) is refused as the spec says (-32601; -32021). The argument
`answer_after` delays the answer after the task is made (a caller cancelling meanwhile). With one, the job runs
in an asyncio task of this process and the answer is the task handle; `maybe_job` ("optional") runs as a
task the same way when its caller asks for one, and plainly (the SDK's own tool) otherwise; `tasks/get` (2026-07-28: the
result inlined once completed), `tasks/result` (legacy, blocks), `tasks/cancel` and `tasks/update` (2026-07-28: an empty ack) serve it.
A finished job is recorded in `Stats.completed` under its `run` label, a cancelled one in
`Stats.cancelled`; `Stats.tasks` counts the tasks created (the ids are never the platform's).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TOOL = "long_job"
# A tool that runs as a task when its caller asks (2026-07-28: declares the extension), else plainly.
OPTIONAL_TOOL = "maybe_job"
SUPPORT = {TOOL: "required", OPTIONAL_TOOL: "optional"}
POLL_MS = 100
TTL_MS = 60_000
TERMINAL = ("completed", "failed", "cancelled")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Job:
    """One task of `long_job`."""

    task_id: str
    run: str
    modern: bool
    status: str = "working"
    created: str = field(default_factory=_now)
    updated: str = field(default_factory=_now)
    result: dict[str, Any] | None = None
    runner: asyncio.Task | None = None

    def describe(self, detailed: bool = False) -> dict[str, Any]:
        task: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        task |= {"createdAt": self.created, "lastUpdatedAt": self.updated}
        task |= (
            {"ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}
            if self.modern
            else {"ttl": TTL_MS, "pollInterval": POLL_MS}
        )
        if detailed and self.status == "completed" and self.result is not None:
            task["result"] = self.result
        return task


class TaskMiddleware:
    """The SDK server middleware serving `long_job` as a task (see the module's docstring)."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats
        self.jobs: dict[str, Job] = {}

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        method, params = ctx.method, dict(ctx.params or {})
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or method == "server/discover"
        if method == "initialize":
            result = await call_next(ctx)
            result["capabilities"]["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            return result
        if method == "server/discover":
            result = await call_next(ctx)
            result["capabilities"].setdefault("extensions", {})[EXTENSION] = {}
            return result
        if method == "tools/list":
            result = await call_next(ctx)
            for tool in result.get("tools", []):
                if tool.get("name") in SUPPORT:
                    tool["execution"] = {"taskSupport": SUPPORT[tool["name"]]}
            return result
        if method == "tools/call" and params.get("name") == OPTIONAL_TOOL and not self._asked(params, modern):
            return await call_next(ctx)  # a plain call: the SDK runs the tool's own body
        if method == "tools/call" and params.get("name") in SUPPORT:
            answer = self._create(params, modern)
            # `answer_after`: the handle is answered that late, the task already made (a cancel's race).
            await asyncio.sleep(float((params.get("arguments") or {}).get("answer_after", 0)))
            return answer
        if method in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update"):
            return await self._task_method(method, params, modern)
        return await call_next(ctx)

    @staticmethod
    def _asked(params: dict[str, Any], modern: bool) -> bool:
        """Whether the caller takes a task: 2026-07-28, the extension declared; legacy, `params.task`."""
        if modern:
            extensions = ((params.get("_meta") or {}).get(CAPABILITIES_KEY) or {}).get("extensions") or {}
            return EXTENSION in extensions
        return isinstance(params.get("task"), dict)

    def _create(self, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        if modern and not self._asked(params, modern):
            data = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
            raise MCPError(code=-32021, message=f"Tool {TOOL} runs only as a task.", data=data)
        if not self._asked(params, modern):
            raise MCPError(code=-32601, message=f"Tool {TOOL} must be called as a task (params.task).")
        arguments = params.get("arguments") or {}
        job = Job(task_id="up-" + secrets.token_hex(8), run=str(arguments.get("run", "")), modern=modern)
        self.jobs[job.task_id] = job
        self.stats.tasks += 1
        steps, delay = int(arguments.get("steps", 3)), float(arguments.get("delay", 0.1))
        job.runner = asyncio.get_running_loop().create_task(self._work(job, steps, delay))
        return {"resultType": "task", **job.describe()} if modern else {"task": job.describe()}

    async def _work(self, job: Job, steps: int, delay: float) -> None:
        for _ in range(steps):
            await asyncio.sleep(delay)
        text = f"job done after {steps} steps"
        # What the SDK answers for a `-> str` tool: the text, and as structured output (its output schema).
        job.result = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}
        job.result["isError"] = False
        job.status, job.updated = "completed", _now()
        self.stats.completed.append(job.run)

    async def _task_method(self, method: str, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        job = self.jobs.get(str(params.get("taskId")))
        if job is None:
            raise MCPError(code=-32602, message="Failed to retrieve task: Task not found")
        if method == "tasks/get":
            return job.describe(detailed=modern)
        if method == "tasks/update":
            return {}
        if method == "tasks/cancel":
            if job.status in TERMINAL:
                if modern:
                    return {}
                raise MCPError(
                    code=-32602, message=f"Cannot cancel task: already in terminal status '{job.status}'"
                )
            job.status, job.updated = "cancelled", _now()
            assert job.runner is not None
            job.runner.cancel()
            self.stats.cancelled.append(job.run)
            return {} if modern else job.describe()
        assert job.runner is not None
        await asyncio.wait({job.runner})  # tasks/result blocks until the job is terminal
        if job.result is None:
            raise MCPError(code=-32602, message=f"Task {job.task_id} was cancelled; it has no result.")
        return {**job.result, "_meta": {RELATED_TASK: {"taskId": job.task_id}}}
