"""The upstream kind: a published tool called through the catalog on a real SDK upstream (stateful and stateless)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest
from asgiref.sync import sync_to_async
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_app import catalog
from mcp_app.core.types import ToolDef, UpstreamRef
from mcp_app.federation import breaker, call_stats
from mcp_app.handlers import registry, upstream
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.infra import otel, tracing
from mcp_app.models import Guardrail, Tool, Upstream, UpstreamTool
from mcp_app.protocol import tools
from mcp_app.upstreams import service
from tenants import wall
from tests.protocol.support import result_of
from tests.upstreams.running import make_upstream, running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = pytest.mark.django_db(transaction=True)
BEARER = "upstream-bearer-7f3a9c"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


@pytest.fixture(params=[False, True], ids=["stateful", "stateless"])
def remote(request, tmp_path) -> Iterator[UpstreamServer]:
    with running_upstream(tmp_path, stateless=request.param, bearer=BEARER) as server:
        yield server


def published(tenant, remote: UpstreamServer, **publish) -> dict[str, Tool]:  # noqa: ANN001
    """Sync the upstream (bearer in its secret headers) and publish its echo, add and slow_count."""
    row = make_upstream(tenant, remote.url, timeout_seconds=5)
    row.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    row.save()
    with wall.tenant(tenant.id):
        service.sync(row)
        rows = {r.remote_name: r for r in UpstreamTool.objects.filter(upstream=row)}
        return {
            name: service.publish(rows[name], **publish.get(name, {}))
            for name in ("echo", "add", "slow_count")
        }


async def tool_def(tenant, name: str) -> ToolDef | None:  # noqa: ANN001
    catalog.clear_caches()
    return (await catalog.get_catalog(tenant.id)).tools_by_name.get(name)


async def test_a_call_passes_arguments_and_fixed_values_and_returns_the_upstream_result(
    ctx, tenant_a, remote, recorder
) -> None:
    await sync_to_async(published)(tenant_a, remote, slow_count={"fixed": {"delay": 0.01}})
    echo = await tool_def(tenant_a, "docs_echo")
    result = await registry.run_inline(ctx, echo, {"message": "hi"})
    assert result["structuredContent"] == {"echo": "hi"} and not result.get("isError")
    count = await tool_def(tenant_a, "docs_slow_count")
    assert "delay" not in count.input_schema["properties"]
    result = await registry.run_inline(ctx, count, {"n": 3})
    assert result["content"][0]["text"] == "counted to 3"
    progress = [m["params"] for m in recorder.messages if m["method"] == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3] and progress[-1]["message"] == "step 3"
    logs = [m["params"] for m in recorder.messages if m["method"] == "notifications/message"]
    assert [log["data"] for log in logs] == ["counted 1", "counted 2", "counted 3"]


async def test_the_catalog_gives_the_handler_the_upstream_and_leaves_out_a_disabled_one(
    tenant_a, remote
) -> None:
    await sync_to_async(published)(tenant_a, remote)
    echo = await tool_def(tenant_a, "docs_echo")
    row = await Upstream.objects.aget(tenant=tenant_a)
    # The handler's configuration is the row's; its upstream is a typed reference (AMB-310).
    assert echo.handler_config == {"tool": "echo", "fixed": {}, "upstream_task": "forbidden"}
    assert echo.upstream == UpstreamRef(
        name="docs", upstream_id=row.pk, url=remote.url, mode="auto", transport="streamable-http",
        timeout_seconds=5, prefix="docs_", remote="echo", secrets=row.secret_headers, oauth=(), connection="",
        completions="completions" in row.last_capabilities,
    )  # fmt: skip
    row.enabled = False
    await row.asave()
    assert await tool_def(tenant_a, "docs_echo") is None


def publish_long_job(tenant, remote: UpstreamServer) -> None:  # noqa: ANN001
    published(tenant, remote)
    with wall.tenant(tenant.id):
        service.publish(UpstreamTool.objects.get(upstream__tenant=tenant, remote_name="long_job"))


async def test_a_tool_its_upstream_runs_as_a_task_is_called_as_one_and_listed_optional(
    ctx, tenant_a, remote
) -> None:
    # AMB-199, AMB-200: the pin says required; we can run it plainly or as our task, so "optional".
    await sync_to_async(publish_long_job)(tenant_a, remote)
    job, echo = await tool_def(tenant_a, "docs_long_job"), await tool_def(tenant_a, "docs_echo")
    assert (job.handler_config["upstream_task"], job.task_support) == ("required", "optional")
    assert (echo.handler_config["upstream_task"], echo.task_support) == ("forbidden", "forbidden")
    with wall.tenant(tenant_a.id):
        assert await sync_to_async(catalog.loader._has_task_tools)(tenant_a.id)
    result = await registry.run_inline(ctx, job, {"steps": 2, "delay": 0.01, "run": "kind"})
    assert result["content"][0]["text"] == "job done after 2 steps" and not result.get("isError")
    assert remote.stats()["tasks"] == 1 and remote.stats()["methods"]["tools/call"] == 1
    # The owner's explicit choice stands; the upstream still runs it as a task.
    await Tool.objects.filter(tenant=tenant_a, name="docs_long_job").aupdate(task_support="forbidden")
    job = await tool_def(tenant_a, "docs_long_job")
    assert (job.handler_config["upstream_task"], job.task_support) == ("required", "forbidden")


async def test_a_tool_its_upstream_may_run_as_a_task_is_called_plainly_and_listed_optional(
    ctx, tenant_a, remote
) -> None:
    # AMB-200: an upstream's "optional" is called plainly (progress and logs stream, one exchange).
    def publish_maybe_job() -> None:
        published(tenant_a, remote)
        with wall.tenant(tenant_a.id):
            service.publish(UpstreamTool.objects.get(upstream__tenant=tenant_a, remote_name="maybe_job"))

    await sync_to_async(publish_maybe_job)()
    job = await tool_def(tenant_a, "docs_maybe_job")
    assert (job.handler_config["upstream_task"], job.task_support) == ("optional", "optional")
    result = await registry.run_inline(ctx, job, {"steps": 2, "delay": 0.01, "run": "maybe"})
    assert result["content"][0]["text"] == "job done plainly after 2 steps"
    assert remote.stats()["tasks"] == 0 and "maybe" in remote.stats()["completed"]


async def test_a_dead_upstream_gives_an_error_result_naming_it(ctx, tenant_a, remote) -> None:
    await sync_to_async(published)(tenant_a, remote)
    echo = await tool_def(tenant_a, "docs_echo")
    await sync_to_async(remote.stop)()
    result = await registry.run_inline(ctx, echo, {"message": "hi"})
    assert result["isError"]
    text = result["content"][0]["text"]
    assert text.startswith("Upstream 'docs':") and "127.0.0.1" in text and BEARER not in text


async def test_output_that_breaks_the_pinned_output_schema_is_an_error_result(ctx, tenant_a, remote) -> None:
    await sync_to_async(published)(tenant_a, remote)
    add = await Tool.objects.aget(tenant=tenant_a, name="docs_add")
    add.output_schema = {**add.output_schema, "properties": {"sum": {"type": "string"}}}
    await add.asave()
    found = await catalog.get_catalog(tenant_a.id)
    result = await tools.execute(ctx, found, await tool_def(tenant_a, "docs_add"), {"a": 1, "b": 2}, False)
    assert result["isError"]
    assert "does not match its output schema" in result["content"][0]["text"]


async def test_guardrails_stand_between_the_caller_and_the_upstream(ctx, tenant_a, remote) -> None:
    """AMB-354: a redacted argument is what the upstream receives, a blocked one never reaches it, and
    what it answers is redacted before the caller sees it."""
    await sync_to_async(published)(tenant_a, remote)
    for fields in (
        {"name": "cards-in", "detector": "card", "where": "arguments"},
        {"name": "keys-in", "detector": "secrets", "where": "arguments", "action": "block"},
        {"name": "mail-out", "detector": "email", "where": "results"},
    ):
        await Guardrail.objects.acreate(tenant=tenant_a, **fields)
    catalog.clear_caches()

    async def echo(message: str) -> dict:
        return await result_of(ctx, "tools/call", {"name": "docs_echo", "arguments": {"message": message}})

    assert (await echo("card 4111 1111 1111 1111"))["structuredContent"] == {"echo": "card [redacted card number]"}
    assert (await echo("bob@example.com"))["structuredContent"] == {"echo": "[redacted e-mail address]"}
    key = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    blocked = await echo(key)
    assert blocked["isError"] and blocked["content"][0]["text"] == (
        "Blocked by guardrail 'keys-in': the arguments held a GitHub Token."
    )


async def test_the_calls_trace_context_goes_on_to_the_upstream_in_meta(ctx, tenant_a, remote, monkeypatch) -> None:
    """AMB-357: with tracing on, the upstream's tools/call carries the current span's `traceparent` in
    its `_meta` (the SDK's client injects it), so one trace shows client, platform and upstream."""
    await sync_to_async(published)(tenant_a, remote)
    provider = otel.make_provider("test", [InMemorySpanExporter()])
    monkeypatch.setattr(tracing, "active", otel.Tracing(provider))
    with provider.get_tracer("test").start_as_current_span("client call") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        result = await tools.execute(ctx, await catalog.get_catalog(tenant_a.id), await tool_def(tenant_a, "docs_echo"),
                                     {"message": "hi"}, False)  # fmt: skip
    assert not result.get("isError")
    [sent] = [c for c in remote.stats()["calls"] if c["name"] == "echo"]
    assert sent["meta"]["traceparent"].split("-")[1] == trace_id
    provider.shutdown()


async def test_a_cancelled_call_cancels_the_upstream_call(ctx, tenant_a, remote, recorder) -> None:
    await sync_to_async(published)(tenant_a, remote)
    count = await tool_def(tenant_a, "docs_slow_count")
    cancelled = asyncio.Event()
    call = asyncio.ensure_future(
        upstream.run(replace(ctx, cancelled=cancelled), count, {"n": 200, "run": "c1"})
    )
    async with asyncio.timeout(10):  # the upstream is a few steps in
        while "notifications/progress" not in recorder.methods():
            await asyncio.wait({call}, timeout=0.02)
    cancelled.set()
    with pytest.raises(upstream.ToolError, match="cancelled"):
        await asyncio.wait_for(call, 10)
    async with asyncio.timeout(10):  # the upstream hears of it
        while "c1" not in (await sync_to_async(remote.stats)())["cancelled"]:
            await asyncio.wait({call}, timeout=0.05)
    assert "c1" in (await sync_to_async(remote.stats)())["cancelled"]


async def test_a_published_tools_calls_count_in_its_upstreams_health_and_a_dead_one_opens_its_circuit(
    ctx, tenant_a, remote, settings
) -> None:
    # The admin and /metrics read health by the row's (tenant, id): the handler must count under it.
    settings.MCP_UPSTREAM_BREAKER_FAILURES = 2
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 60
    breaker.reset()
    call_stats.reset()
    try:
        await sync_to_async(published)(tenant_a, remote)
        echo = await tool_def(tenant_a, "docs_echo")
        row = await Upstream.objects.aget(tenant=tenant_a)
        assert not (await registry.run_inline(ctx, echo, {"message": "hi"})).get("isError")
        await sync_to_async(remote.stop)()
        for _ in range(3):
            assert (await registry.run_inline(ctx, echo, {"message": "hi"}))["isError"]

        found = call_stats.of((tenant_a.id, row.pk))
        assert found is not None and found.last_success is not None
        assert (found.calls, found.failures[call_stats.UNAVAILABLE], found.circuit) == (5, 3, breaker.OPEN)
    finally:
        breaker.reset()
        call_stats.reset()
