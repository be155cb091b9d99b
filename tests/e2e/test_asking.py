"""A tool asks the person through the official SDK client's elicitation callback, in both eras.

auto (2026-07-28): the call returns InputRequiredResult and the SDK retries with the answer.
legacy: an elicitation/create request on the call's stream; the SDK answers with a POST. The answer
may land on another Daphne process (raw HTTP below, since the SDK always posts to the same URL).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp_types import ElicitResult

from tests.e2e.helpers import (
    answered_on_the_other_server,
    call_answering_a_name,
    sdk_client,
    wait_until_served,
)
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(scope="module")
def ask_tool(server: DaphneServer) -> Iterator[str]:
    """A python-kind tool of the demo tenant whose callable asks for a name (mcp_app.demo.callables)."""
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='ask_name', "
        "defaults=dict(handler='python', handler_config={'callable': 'ask_name'}, timeout_seconds=60))\n",
    )
    wait_until_served(server.mcp_url(), "ask_name")
    yield "ask_name"
    django_shell(
        server.env, "from mcp_app.models import Tool\nTool.objects.filter(name='ask_name').delete()\n"
    )
    wait_until_served(server.mcp_url(), "ask_name", present=False)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("accept", "Hello, Ada!"),
        ("decline", "No name given (decline)."),
        ("cancel", "No name given (cancel)."),
    ],
)
async def test_the_sdk_answers_a_tools_question_through_its_elicitation_callback(
    server: DaphneServer, ask_tool: str, mode: str, action: str, expected: str
) -> None:
    asked, result = await call_answering_a_name(server.mcp_url(), mode, ask_tool, action)
    assert asked == ["Who are you?"]
    assert result.content[0].text == expected


@pytest.mark.services(reason="the answer lands on another Daphne process and travels through Redis")
async def test_a_legacy_answer_posted_to_the_other_daphne_reaches_the_waiting_tool(
    server: DaphneServer, server_b: DaphneServer, ask_tool: str
) -> None:
    text = await answered_on_the_other_server(server.mcp_url(), server_b.mcp_url(), ask_tool, "Bo")
    assert text == "Hello, Bo!"


@pytest.fixture(scope="module")
def ask_prompt(server: DaphneServer) -> Iterator[str]:
    """A demo-tenant prompt whose `language` argument the server asks for when the client leaves it out."""
    django_shell(
        server.env,
        "from mcp_app.models import Prompt\nfrom tenants.models import Tenant\n"
        "Prompt.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name='ask_language', "
        "defaults=dict(arguments=[{'name': 'language', 'required': True, 'ask': True}], "
        "messages=[{'role': 'user', 'content': {'type': 'text', 'text': 'Write {{ language }}.'}}]))\n",
    )
    wait_until_served(server.mcp_url(), "ask_language", kind="prompts")
    yield "ask_language"
    django_shell(
        server.env, "from mcp_app.models import Prompt\nPrompt.objects.filter(name='ask_language').delete()\n"
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_answers_a_prompts_question_for_an_argument_it_left_out(
    server: DaphneServer, ask_prompt: str, mode: str
) -> None:
    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        assert list(params.requested_schema["properties"]) == ["language"]
        return ElicitResult(action="accept", content={"language": "Rust"})

    async with sdk_client(
        server.mcp_url(),
        mode,
        elicitation_callback=on_elicit,
    ) as client:
        result = await client.get_prompt(ask_prompt, {})
    assert result.messages[0].content.text == "Write Rust."
