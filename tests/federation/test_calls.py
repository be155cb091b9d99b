"""discover and call_tool against the SDK's server, in both eras: results pass through as the wire has them."""

from __future__ import annotations

import asyncio

import anyio
import httpx2
import pytest

from mcp_app.federation import UpstreamError, breaker, call_tool, discover
from mcp_app.federation.transport import CallState, CappedStream, MessageTooLarge
from tests.federation.support import target_for

HANDSHAKES = {"2026-07-28": "server/discover", "legacy": "initialize"}
ERA_VERSIONS = {"2026-07-28": "2026-07-28", "legacy": "2025-11-25"}


async def test_discover_reports_the_era_identity_and_every_tool(upstream, era):
    offering = await discover(target_for(upstream))

    assert offering.protocol_version == ERA_VERSIONS[era]
    assert offering.server_info["name"] == "upstream"
    assert offering.instructions == "A test upstream."
    assert "tools" in offering.capabilities
    names = [tool["name"] for tool in offering.tools]
    assert names == [
        "echo", "add", "slow_count", "long_job", "maybe_job", "fail", "hang", "shout", "regional", "redescribe",
        "reshape", "ask_name", "summarize", "list_roots", "ask_then_sample", "ask_forever", "retool",
        "big", "public_counter", "show_card", "redescribe_prompt",
    ]  # fmt: skip
    add = next(tool for tool in offering.tools if tool["name"] == "add")
    job = next(tool for tool in offering.tools if tool["name"] == "long_job")
    assert job["execution"] == {"taskSupport": "required"}  # what a published tool's pin keeps (AMB-199)
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"]["properties"]["sum"]["type"] == "integer"


async def test_a_result_passes_through_with_text_and_structured_content(upstream):
    result = await call_tool(target_for(upstream), "echo", {"message": "hello"})

    assert result["content"] == [{"type": "text", "text": "hello"}]
    assert result["structuredContent"] == {"echo": "hello"}
    assert result["isError"] is False


async def test_an_output_schema_tool_returns_its_structured_content(upstream):
    result = await call_tool(target_for(upstream), "add", {"a": 2, "b": 3})

    assert result["structuredContent"] == {"sum": 5}


async def test_an_error_result_is_a_result_not_an_exception(upstream):
    result = await call_tool(target_for(upstream), "fail", {"reason": "no luck"})

    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "no luck"}]


async def test_an_unknown_tool_is_the_upstreams_answer(upstream):
    result = await call_tool(target_for(upstream), "no_such_tool", {})

    assert result["isError"] is True
    assert "no_such_tool" in result["content"][0]["text"]


async def test_legacy_mode_speaks_the_handshake_even_to_a_2026_server(modern_upstream):
    offering = await discover(target_for(modern_upstream, mode="legacy"))

    assert offering.protocol_version == "2025-11-25"
    result = await call_tool(target_for(modern_upstream, mode="legacy"), "echo", {"message": "x"})
    assert result["structuredContent"] == {"echo": "x"}


async def test_auto_mode_speaks_2026_to_a_stateful_sdk_server(start_upstream):
    server = start_upstream(stateless=False)

    offering = await discover(target_for(server))

    assert offering.protocol_version == "2026-07-28"
    assert server.stats()["methods"].get("initialize", 0) == 0


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_upstream_answering_json_instead_of_sse_works(start_upstream, mode):
    server = start_upstream(stateless=False, json_response=True)

    result = await call_tool(target_for(server, mode=mode), "slow_count", {"n": 2, "delay": 0.01})

    assert result["content"][0]["text"] == "counted to 2"


async def test_an_argument_the_upstream_wants_as_a_header_is_mirrored(upstream):
    result = await call_tool(target_for(upstream), "regional", {"region": "eu-west"})

    assert result["isError"] is False
    assert result["content"][0]["text"] == "region eu-west"


async def test_a_reply_past_the_message_limit_is_abandoned_with_words_and_the_next_call_works(
    upstream, settings
):
    settings.MCP_UPSTREAM_MAX_MESSAGE_BYTES = 64 * 1024
    target = target_for(upstream)

    with pytest.raises(UpstreamError) as refused:
        await call_tool(target, "echo", {"message": "x" * 100_000})

    assert refused.value.message == (
        f"Upstream {target.label} sent a message larger than 65536 bytes; it was not read."
    )
    result = await call_tool(target, "echo", {"message": "small"})
    assert result["structuredContent"] == {"echo": "small"}


async def test_a_reply_under_the_message_limit_but_past_a_mebibyte_is_read(upstream):
    # The bound is MCP_UPSTREAM_MAX_MESSAGE_BYTES (4 MiB), not the SDK's own 1 MiB an SSE event.
    message = "x" * 1_500_000

    result = await call_tool(target_for(upstream), "echo", {"message": message})

    assert result["structuredContent"] == {"echo": message}


@pytest.mark.parametrize("json_response", [False, True], ids=["sse-replies", "json-replies"])
async def test_a_reply_past_the_message_limit_ends_only_its_own_call_on_a_shared_connection(
    start_upstream, era, json_response, settings
):
    # One pooled client serves every call of its key: the reply abandoned at the bound is one HTTP
    # response of it, and the call beside it (same key, same client) still gets its own result.
    settings.MCP_UPSTREAM_MAX_MESSAGE_BYTES = 64 * 1024
    server = start_upstream(
        stateless=era == "2026-07-28", legacy_only=era == "legacy", json_response=json_response
    )
    target = target_for(server)
    await call_tool(target, "echo", {"message": "opened"})
    counting = asyncio.create_task(
        call_tool(target, "slow_count", {"n": 10, "delay": 0.1, "run": "beside-big"})
    )
    with anyio.fail_after(10):  # the count is running upstream, its reply not yet sent
        while not any(call["name"] == "slow_count" for call in server.stats()["calls"]):
            await asyncio.sleep(0.02)
    with pytest.raises(UpstreamError) as refused:
        await call_tool(target, "big", {"megabytes": 1})

    assert refused.value.message == (
        f"Upstream {target.label} sent a message larger than 65536 bytes; it was not read."
    )
    result = await counting
    assert result["content"][0]["text"] == "counted to 10"
    assert "beside-big" in server.stats()["completed"]
    assert (await call_tool(target, "echo", {"message": "after"}))["structuredContent"] == {"echo": "after"}
    # Still the one connection: nothing was torn down or opened again for the abandoned reply.
    assert server.stats()["methods"][HANDSHAKES[era]] == 1


async def test_a_call_flooded_past_its_message_budget_ends_in_words_and_pauses_the_upstream(
    upstream, settings
):
    # AMB-188: each step of slow_count is a progress and a log message; 300 steps with no delay is a flood.
    settings.MCP_UPSTREAM_MESSAGE_BURST, settings.MCP_UPSTREAM_MESSAGES_PER_SECOND = 40, 5
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 30
    target = target_for(upstream)
    heard: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(value)

    async def log(level: str, data: object, logger: str | None) -> None:
        heard.append(0)

    with pytest.raises(UpstreamError) as ended:
        await call_tool(target, "slow_count", {"n": 300, "delay": 0}, on_progress=progress, on_log=log)

    assert ended.value.message == (
        f"Upstream {target.label} sent this call more than 40 messages at once (then 5 a second); "
        "the call was ended. Calls to it pause for 30 s."
    )
    assert len(heard) <= 40  # nothing past the budget was parsed, let alone relayed
    with pytest.raises(UpstreamError) as paused:
        await call_tool(target, "echo", {"message": "again"})
    assert paused.value.message.startswith(f"Upstream {target.label} is unavailable; retry after ")
    breaker.reset()  # the pause over: a well-behaved call goes through (the flooded reply alone ended)
    result = await call_tool(target, "slow_count", {"n": 5, "delay": 0}, on_progress=progress, on_log=log)
    assert result["content"][0]["text"] == "counted to 5"


async def test_a_flooded_reply_ends_only_its_own_call_on_a_shared_connection(upstream, era, settings):
    # As a reply too large (AMB-363): the call beside the flood, begun before the breaker opened, ends
    # well, and the connection they shared takes the next call once the pause is over.
    settings.MCP_UPSTREAM_MESSAGE_BURST, settings.MCP_UPSTREAM_MESSAGES_PER_SECOND = 40, 5
    target = target_for(upstream, identity=f"flood-beside-{era}")
    await call_tool(target, "echo", {"message": "opened"})
    handshakes = upstream.stats()["methods"][HANDSHAKES[era]]
    run = f"beside-flood-{era}"
    counting = asyncio.create_task(call_tool(target, "slow_count", {"n": 10, "delay": 0.1, "run": run}))
    with anyio.fail_after(10):
        while run not in [call["arguments"].get("run") for call in upstream.stats()["calls"]]:
            await asyncio.sleep(0.02)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    with pytest.raises(UpstreamError) as ended:
        await call_tool(target, "slow_count", {"n": 300, "delay": 0}, on_progress=progress)

    assert "more than 40 messages at once" in ended.value.message
    assert (await counting)["content"][0]["text"] == "counted to 10"
    breaker.reset()
    assert (await call_tool(target, "echo", {"message": "after"}))["structuredContent"] == {"echo": "after"}
    assert upstream.stats()["methods"][HANDSHAKES[era]] == handshakes


class Chunks(httpx2.AsyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # noqa: ANN204 - an async generator
        for chunk in self.chunks:
            yield chunk


async def read(stream: CappedStream) -> bytes:
    return b"".join([chunk async for chunk in stream])


async def test_an_sse_reply_is_limited_per_event_not_for_its_whole_length():
    event = b"data: " + b"a" * 900 + b"\r\n\r\n"
    many = CappedStream(Chunks(*([event] * 50)), 1024, sse=True, state=None)
    assert len(await read(many)) == 50 * len(event)

    split = b"data: " + b"b" * 700, b"b" * 700 + b"\n\n"  # one event over two chunks
    with pytest.raises(MessageTooLarge):
        await read(CappedStream(Chunks(*split), 1024, sse=True, state=None))
    state = CallState()
    with pytest.raises(MessageTooLarge):  # a JSON reply is one message, blank lines or not
        await read(CappedStream(Chunks(event, event), 1024, sse=False, state=state))
    assert state.too_large == 1024
