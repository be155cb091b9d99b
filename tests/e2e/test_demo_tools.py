"""Every demo tool, prompt and resource works with the official SDK client, as a new user tries them."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

from tests.e2e.helpers import sdk_client, wait_until_served
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

ARGUMENTS = {
    "echo": {"message": "hi"},
    "add": {"a": 2, "b": 3},
    "greet": {"name": "Ada"},
    "show_logo": {},
    "count_slowly": {"n": 2, "delay": 0},
    "count_in_background": {"n": 2, "delay": 0},
    "fetch_json": {"hello": "echo"},
    "fetch_json_self": {"hello": "echo"},
    "stream_count": {"n": 2, "delay": 0},
    "ask_user": {},
    "show_roots": {},
    "delete_note": {"note": "groceries"},
    "summarize": {"text": "A long text about MCP."},
    "roll_dice": {"dice": 2},
}


@pytest.fixture(scope="module")
def fetch_json_self(server: DaphneServer) -> str:
    """The seeded fetch_json as bin/serve leaves it: posting to this platform's own /demo/echo.

    (The e2e database points the seeded one at a recording upstream; this copy keeps the real target.)
    """
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(tenant__slug='demo', name='fetch_json')\n"
        "tool.pk = None\n"
        "tool.name = 'fetch_json_self'\n"
        f"tool.handler_config = {{**tool.handler_config, 'url': {server.url + '/demo/echo'!r}}}\n"
        "tool.save()\n",
    )
    wait_until_served(server.mcp_url("demo"), "fetch_json_self")
    return "fetch_json_self"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_demo_tool_prompt_and_resource_answers_without_an_error(
    server: DaphneServer, worker_if_any: object, fetch_json_self: str, mode: str
) -> None:
    async def fill_in(context: Any, params: Any) -> ElicitResult:  # what a person types into the form
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def share_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///home/ada/project", name="project")])

    async def model(context: Any, params: Any) -> CreateMessageResult:  # the client's own model
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="A summary."), model="m"
        )

    async with sdk_client(
        server.mcp_url("demo"),
        mode,
        elicitation_callback=fill_in,
        list_roots_callback=share_roots,
        sampling_callback=model,
    ) as c:
        tools = {tool.name for tool in (await c.list_tools()).tools}
        assert set(ARGUMENTS) <= tools, tools
        for name in sorted(tools & set(ARGUMENTS)):
            result = await c.call_tool(name, ARGUMENTS[name])
            assert not result.is_error, (name, result.content)
        greeted = await c.call_tool("ask_user", {})
        assert greeted.content[0].text == "Hello, Ada! Nice to meet you."
        assert greeted.structured_content == {"name": "Ada"}
        roots = await c.call_tool("show_roots", {})
        assert "file:///home/ada/project (project)" in roots.content[0].text
        summary = await c.call_tool("summarize", {"text": "A long text about MCP."})
        assert summary.content[0].text == "A summary."
        deleted = await c.call_tool("delete_note", {"note": "groceries"})
        assert deleted.content[0].text == "Deleted groceries."
        echoed = await c.call_tool(fetch_json_self, {"hello": "echo"})
        assert '"echo": {"hello": "echo"}' in echoed.content[0].text
        for prompt in (await c.list_prompts()).prompts:
            arguments = {argument.name: "python" for argument in prompt.arguments or []}
            assert (await c.get_prompt(prompt.name, arguments)).messages, prompt.name
        for resource in (await c.list_resources()).resources:
            assert (await c.read_resource(resource.uri)).contents, resource.uri
        for template in (await c.list_resource_templates()).resource_templates:
            uri = template.uri_template.replace("{user_id}", "42")
            assert (await c.read_resource(uri)).contents, uri
