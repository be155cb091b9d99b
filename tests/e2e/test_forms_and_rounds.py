"""What a definition can now ask for, through the official SDK client in both eras (AMB-120..124).

Choices in a form (the SDK's elicitation callback picks them), several questions asked together
(one 2026-07-28 round, named by the definition; one after another on a legacy session), and a tool
that must be a task refusing a client without the tasks extension.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import MCPError
from mcp_types import ElicitResult

from tests.e2e.helpers import sdk_client, wait_until_served
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TITLED = [{"const": "p1", "title": "Starter"}, {"const": "p2", "title": "Pro"}]
CHOICES = {
    "message": "Pick a plan",
    "fields": {
        "type": "object",
        "properties": {
            "plan": {"type": "string", "oneOf": TITLED, "default": "p1"},
            "scopes": {
                "type": "array",
                "minItems": 1,
                "items": {"anyOf": [{"const": "r", "title": "Read"}, {"const": "w", "title": "Write"}]},
            },
        },
        "required": ["plan", "scopes"],
    },
    "text": "{{ plan }}: {{ scopes|join:'+' }}",
}
QUESTIONS = {
    "questions": [
        {"name": n, "message": f"{n}?", "fields": {"type": "object", "properties": {n: {"type": "string"}}}}
        for n in ("who", "where", "when")
    ],
    "text": "{{ who }} {{ where }} {{ when }}",
}
TOOLS = {
    "e2e_pick": f"handler='form', handler_config={CHOICES!r}",
    "e2e_plan": f"handler='form', handler_config={QUESTIONS!r}",
    "e2e_must_task": "handler='template', handler_config={'text': 'ran'}, task_support='required'",
}


@pytest.fixture(scope="module")
def tools(server: DaphneServer) -> Iterator[None]:
    lines = [
        "from mcp_app.models import Tool",
        "from tenants.models import Tenant",
        "t = Tenant.objects.get(slug='demo')",
    ]
    for name, values in TOOLS.items():
        lines.append(
            f"Tool.objects.update_or_create(tenant=t, name={name!r}, defaults=dict({values}, timeout_seconds=60))"
        )
    django_shell(server.env, "\n".join(lines) + "\n")
    for name in TOOLS:
        wait_until_served(server.mcp_url(), name)
    yield
    django_shell(
        server.env,
        f"from mcp_app.models import Tool\nTool.objects.filter(name__in={list(TOOLS)!r}).delete()\n",
    )


def person(content: dict[str, Any], seen: list[Any]) -> Any:
    async def answer(context: Any, params: Any) -> ElicitResult:
        seen.append(params.requested_schema)
        return ElicitResult(action="accept", content=content)

    return answer


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_person_picks_choices_and_the_tool_gets_their_values(
    server: DaphneServer, tools: None, mode: str
) -> None:
    seen: list[Any] = []
    callback = person({"plan": "p2", "scopes": ["r", "w"]}, seen)
    async with sdk_client(server.mcp_url(), mode, elicitation_callback=callback) as client:
        result = await client.call_tool("e2e_pick", {})
    assert result.is_error is not True, result
    assert result.structured_content == {"plan": "p2", "scopes": ["r", "w"]}
    assert result.content[0].text == "p2: r+w"
    # 2025-11-25 (legacy mode) and 2026-07-28 both get the titled choices as written.
    [schema] = seen
    assert schema["properties"]["plan"]["oneOf"] == TITLED
    assert schema["properties"]["scopes"]["items"]["anyOf"][1] == {"const": "w", "title": "Write"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    "content",
    [{"plan": "Pro", "scopes": ["r"]}, {"plan": "p1", "scopes": ["x"]}, {"plan": "p1", "scopes": []}],
)
async def test_an_answer_outside_the_choices_is_the_tools_error_result(
    server: DaphneServer, tools: None, mode: str, content: dict[str, Any]
) -> None:
    async with sdk_client(server.mcp_url(), mode, elicitation_callback=person(content, [])) as client:
        result = await client.call_tool("e2e_pick", {})
    assert result.is_error is True
    assert "do not fit" in result.content[0].text


async def test_the_sdk_in_auto_mode_is_asked_three_named_questions_in_one_round(
    server: DaphneServer, tools: None
) -> None:
    keys: list[str] = []
    all_asked = anyio.Event()

    async def answer(context: Any, params: Any) -> ElicitResult:
        keys.append(str(context.request_id))  # the inputRequests key, in auto mode
        if len(keys) == 3:
            all_asked.set()
        with anyio.fail_after(10):  # only a round carrying all three lets every answer go out
            await all_asked.wait()
        name = params.message.rstrip("?")
        return ElicitResult(action="accept", content={name: name.upper()})

    async with sdk_client(server.mcp_url(), "auto", elicitation_callback=answer) as client:
        result = await client.call_tool("e2e_plan", {})
    assert sorted(keys) == ["when", "where", "who"]
    assert result.content[0].text == "WHO WHERE WHEN"


async def test_the_sdk_in_legacy_mode_is_asked_the_questions_one_after_another(
    server: DaphneServer, tools: None
) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        name = params.message.rstrip("?")
        return ElicitResult(action="accept", content={name: name.upper()})

    async with sdk_client(server.mcp_url(), "legacy", elicitation_callback=answer) as client:
        result = await client.call_tool("e2e_plan", {})
    assert asked == ["who?", "where?", "when?"]
    assert result.content[0].text == "WHO WHERE WHEN"


async def test_a_tool_that_must_be_a_task_tells_an_sdk_without_the_extension_what_it_needs(
    server: DaphneServer, tools: None
) -> None:
    """The SDK (mcp 2.3) declares no tasks extension: auto mode gets -32021 naming it, nothing runs;
    a 2025-11-25 session calling without params.task gets -32601, as the 2025-11-25 tasks page says."""
    async with sdk_client(server.mcp_url(), "auto") as client:
        with pytest.raises(MCPError) as modern:
            await client.call_tool("e2e_must_task", {})
    assert modern.value.code == -32021
    assert modern.value.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    assert TASKS_EXTENSION in modern.value.message
    async with sdk_client(server.mcp_url(), "legacy") as client:
        with pytest.raises(MCPError) as legacy:
            await client.call_tool("e2e_must_task", {})
    assert legacy.value.code == -32601
