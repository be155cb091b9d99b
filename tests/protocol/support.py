"""Helpers for protocol tests: one-call wrappers around dispatch (contexts: tests.support.make_ctx)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import itertools
from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.core.context import RequestContext
from mcp_app.models import Tool
from mcp_app.protocol import asking, tasks
from mcp_app.protocol.dispatch import dispatch
from tests.support import make_ctx

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


_ids = itertools.count(1)


async def call(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Send one request through dispatch and return the whole response."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method}
    if params is not None:
        message["params"] = params
    reply = await dispatch(ctx, message)
    assert reply is not None
    assert reply["id"] == message["id"]
    return reply


async def result_of(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await call(ctx, method, params)
    assert "error" not in reply, reply
    return reply["result"]


async def error_of(ctx: RequestContext, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await call(ctx, method, params)
    assert "result" not in reply, reply
    return reply["error"]


async def call_answered_on_the_stream(
    tenant: Any, version: str, params: dict[str, Any], answer: dict[str, Any], method: str = "tools/call"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A legacy session's request (tools/call) that asks: (the question sent on its stream, the result).

    The client declares elicitation and answers the first question with `answer` (a result object).
    """
    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        sent.append(message)

    ctx = make_ctx(tenant, version=version, client_capabilities={"elicitation": {}}, emit=emit)
    running = asyncio.create_task(result_of(ctx, method, params))
    async with asyncio.timeout(5):
        while not sent:
            await asyncio.sleep(0.01)
    question = sent[0]
    await asking.deliver(ctx.session.id, {"jsonrpc": "2.0", "id": question["id"], "result": answer})
    return question, await asyncio.wait_for(running, 5)


async def call_answering_each_on_the_stream(
    tenant: Any, version: str, params: dict[str, Any], answers: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A legacy session's tools/call whose questions are answered in turn with `answers` as each comes
    (the client declares elicitation): (every question sent on its stream, in order; the result)."""
    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:
            sent.append(message)
            answer = answers[len(sent) - 1]
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, asking.deliver("sess-1", reply))

    ctx = make_ctx(tenant, version=version, client_capabilities={"elicitation": {}}, emit=emit)
    result = await asyncio.wait_for(result_of(ctx, "tools/call", params), 5)
    return sent, result


def counting_background_tool(tenant: Any, name: str) -> Any:
    """A background tool running the demo's `count_slowly` (progress per step), made in `tenant`."""
    return Tool.objects.create(
        tenant=tenant,
        name=name,
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}, "delay": {"type": "number"}},
        },
        handler="python",
        handler_config={"callable": "count_slowly"},
        timeout_seconds=20,
        execution="background",
    )


async def ctx_for(tenant: Any, version: str = "2025-11-25", **kwargs: Any) -> RequestContext:
    """make_ctx with the tenant as the transport loads it (whether it has task tools)."""
    ctx = make_ctx(tenant, version=version, **kwargs)
    info = await catalogs.get_tenant(tenant.slug)
    assert info is not None
    return dataclasses.replace(ctx, tenant=info)


async def finished(ctx: RequestContext, task_id: str) -> dict[str, Any]:
    """The task once tasks/get says it ended."""
    for _ in range(200):
        task = await result_of(ctx, "tasks/get", {"taskId": task_id})
        if task["status"] in tasks.TERMINAL:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError("the task never ended")
