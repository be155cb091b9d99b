"""A tenant's guardrails on the request path (AMB-354): on a call's arguments before the tool runs (a
block spends no quota, a redaction is what the tool receives), on what a tool, a task, a prompt or a
resource returns, in both eras; saved only when they can run."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from mcp_app.models import Guardrail, Quota, Tool
from mcp_app.protocol import quotas
from tenants.models import Tenant
from tests.protocol.support import (
    call_answered_on_the_stream,
    counting_background_tool,
    ctx_for,
    error_of,
    result_of,
)

GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
ERAS = ["2025-11-25", "2026-07-28"]


@pytest.fixture(autouse=True)
def in_process(settings: Any) -> None:
    settings.MCP_BACKGROUND_TOOLS = "inline"
    quotas.reset()


def guardrail(tenant: Tenant, **fields: Any) -> Guardrail:
    row = Guardrail(tenant=tenant, **{"name": "g", **fields})
    row.full_clean()
    row.save()
    return row


async def ctx(tenant: Tenant, version: str, **kwargs: Any) -> Any:
    return await ctx_for(tenant, version, session=None if version == "2026-07-28" else True, **kwargs)


def echo(message: str) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"message": message}}


@pytest.mark.parametrize("version", ERAS)
async def test_a_blocked_argument_answers_a_tool_error_naming_the_guardrail_and_spends_no_quota(
    demo_a, version
):
    await sync_to_async(guardrail)(
        demo_a, name="no-keys", detector="secrets", where="arguments", action="block"
    )
    await sync_to_async(Quota.objects.create)(tenant=demo_a, name="one", tool="echo", calls=1, window="hour")
    context = await ctx(demo_a, version, client_address="192.0.2.7")
    blocked = await result_of(context, "tools/call", echo(f"my key is {GITHUB}"))
    assert blocked["isError"] is True
    assert blocked["content"] == [
        {"type": "text", "text": "Blocked by guardrail 'no-keys': the arguments held a GitHub Token."}
    ]
    assert GITHUB not in str(blocked)
    assert not (await result_of(context, "tools/call", echo("hello"))).get("isError")  # the quota's one call
    assert (
        "Quota one reached" in (await result_of(context, "tools/call", echo("hello")))["content"][0]["text"]
    )


@pytest.mark.parametrize("version", ERAS)
async def test_a_redacted_argument_is_what_the_tool_receives_and_a_result_is_redacted_in_content_and_structure(
    demo_a, version
):
    await sync_to_async(guardrail)(demo_a, name="cards-in", detector="card", where="arguments")
    await sync_to_async(guardrail)(demo_a, name="mail-out", detector="email", where="results")
    result = await result_of(
        await ctx(demo_a, version), "tools/call", echo("pay 4111 1111 1111 1111, bob@example.com")
    )
    said = "pay [redacted card number], [redacted e-mail address]"
    assert result["structuredContent"] == {"echo": said}
    assert said in result["content"][0]["text"] and "bob@example.com" not in str(result)


async def test_a_guardrail_on_another_tool_or_a_disabled_one_changes_nothing(demo_a):
    await sync_to_async(guardrail)(demo_a, name="only-add", detector="email", tool="add")
    await sync_to_async(guardrail)(demo_a, name="off", detector="email", enabled=False)
    result = await result_of(await ctx(demo_a, "2025-11-25"), "tools/call", echo("bob@example.com"))
    assert result["structuredContent"] == {"echo": "bob@example.com"}


async def test_a_tasks_result_is_guarded_where_it_is_produced(demo_a):
    await sync_to_async(counting_background_tool)(demo_a, "count_in_background")
    await sync_to_async(guardrail)(
        demo_a, name="no-counting", detector="pattern", pattern="Counted to", where="results"
    )
    context = await ctx(demo_a, "2025-11-25")
    created = await result_of(
        context,
        "tools/call",
        {"name": "count_in_background", "arguments": {"n": 2, "delay": 0.01}, "task": {}},
    )
    result = await result_of(context, "tasks/result", {"taskId": created["task"]["taskId"]})
    assert result["content"][0]["text"].startswith("[redacted match of no-counting] 2")


@pytest.mark.parametrize("version", ERAS)
async def test_a_prompt_is_guarded_on_its_arguments_and_its_messages(demo_a, version):
    await sync_to_async(guardrail)(demo_a, name="keys-out", detector="secrets", where="results")
    context = await ctx(demo_a, version)
    got = await result_of(
        context, "prompts/get", {"name": "code_review", "arguments": {"code": f"token = '{GITHUB}'"}}
    )
    assert "token = '[redacted GitHub Token]'" in got["messages"][0]["content"]["text"]
    await sync_to_async(guardrail)(
        demo_a, name="no-mail-in", detector="email", where="arguments", action="block"
    )
    error = await error_of(
        context, "prompts/get", {"name": "code_review", "arguments": {"code": "a@example.com"}}
    )
    assert error["code"] == -32602 and error["data"] == {"guardrail": "no-mail-in"}
    assert error["message"] == "Blocked by guardrail 'no-mail-in': the arguments held an e-mail address."


@pytest.mark.parametrize("version", ERAS)
async def test_a_resource_and_a_template_expansion_are_guarded_on_what_they_return(demo_a, version):
    await sync_to_async(guardrail)(
        demo_a, name="no-hello", detector="pattern", pattern="Hello", action="block"
    )
    await sync_to_async(guardrail)(demo_a, name="users", detector="pattern", pattern="User [0-9]+")
    context = await ctx(demo_a, version)
    error = await error_of(context, "resources/read", {"uri": "demo://readme"})
    assert error["code"] == -32603 and error["data"] == {"guardrail": "no-hello"}
    assert error["message"] == "Blocked by guardrail 'no-hello': the result held a match of no-hello."
    read = await result_of(context, "resources/read", {"uri": "demo://users/7/profile"})
    assert "[redacted match of users]" in read["contents"][0]["text"]


def test_a_guardrail_is_saved_only_when_it_can_run(demo_a) -> None:
    for fields, field, why in [
        ({"detector": "pattern", "pattern": "(?<=a)b"}, "pattern", "look-around"),
        ({"detector": "pattern", "pattern": ".*"}, "pattern", "empty text"),
        ({"detector": "email", "pattern": "x"}, "pattern", "Only a pattern guardrail"),
        ({"detector": "email", "tool": "ehco"}, "tool", "no tool named 'ehco'"),
    ]:
        with pytest.raises(ValidationError) as raised:
            guardrail(demo_a, **fields)
        assert why in str(raised.value.message_dict[field])


def form_tool(tenant: Tenant) -> None:
    Tool.objects.create(
        tenant=tenant, name="ask_name", handler="form",
        handler_config={"message": "What is your name?", "text": "Hello, {{ name }}!",
                        "fields": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    )  # fmt: skip


async def test_the_clients_answer_to_a_tools_question_passes_the_guardrails_on_arguments(demo_a):
    await sync_to_async(form_tool)(demo_a)
    await sync_to_async(guardrail)(demo_a, name="mail-in", detector="email", where="arguments")
    _, result = await call_answered_on_the_stream(
        demo_a, "2025-11-25", {"name": "ask_name", "arguments": {}},
        {"action": "accept", "content": {"name": "bob@example.com"}},
    )  # fmt: skip
    assert result["content"][0]["text"] == "Hello, [redacted e-mail address]!"
    await sync_to_async(guardrail)(
        demo_a, name="no-keys", detector="secrets", where="arguments", action="block"
    )
    _, result = await call_answered_on_the_stream(
        demo_a,
        "2025-11-25",
        {"name": "ask_name", "arguments": {}},
        {"action": "accept", "content": {"name": GITHUB}},
    )
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Blocked by guardrail 'no-keys': the answer held a GitHub Token."
