"""A user connects the official MCP SDK client to the demo tenant on a real Daphne and uses every feature."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from mcp import MCPError
from mcp_types import PromptReference, ResourceTemplateReference
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_app.core import versions
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from tests.e2e.helpers import MCP_HEADERS, REQUEST_SECONDS, Inbox, Upstream, mcp_client
from tests.e2e.servers import DaphneServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DEMO_TOOLS = {"echo", "add", "greet", "show_logo", "count_slowly", "fetch_json"}


def texts(result) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


async def test_lc03_lc04_initialize_returns_tenant_server_info_instructions_and_negotiated_version(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        offered = HANDSHAKE_PROTOCOL_VERSIONS[-1]  # the SDK offers its newest handshake-era revision
        assert client.protocol_version == versions.negotiate(offered)
        assert client.server_info is not None
        assert client.server_info.name == "demo"
        assert client.server_info.title == "Demo MCP server"
        assert client.instructions
        capabilities = client.server_capabilities
        assert capabilities.tools is not None
        assert capabilities.prompts is not None
        assert capabilities.resources is not None and capabilities.resources.subscribe
        assert capabilities.logging is not None
        assert capabilities.completions is not None


async def test_sdk_discover_probe_gets_a_client_error_and_no_session_so_the_sdk_falls_back(
    server: DaphneServer,
) -> None:
    """The SDK's `auto` mode first POSTs `server/discover` (2026-07-28); a 4xx or JSON-RPC error makes it initialize."""
    probe = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        response = await http.post(
            server.mcp_url(), json=probe, headers={**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28"}
        )
    assert response.status_code < 500
    assert "mcp-session-id" not in response.headers
    if response.status_code == 200:
        assert "error" in response.json()
    else:
        assert 400 <= response.status_code < 500


async def test_tl02_tools_list_shows_every_demo_tool_with_schemas_annotations_and_icons(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= DEMO_TOOLS
    assert tools["echo"].input_schema["required"] == ["message"]
    assert tools["echo"].output_schema["required"] == ["echo"]
    assert tools["greet"].annotations is not None and tools["greet"].annotations.read_only_hint is True
    assert tools["greet"].icons


async def test_tl08_tl09_calling_a_python_tool_returns_structured_content_mirrored_as_text(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        await client.list_tools()  # the SDK validates structuredContent against the listed outputSchema
        result = await client.call_tool("echo", {"message": "hi there"})
        added = await client.call_tool("add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.structured_content == {"echo": "hi there"}
    assert any("hi there" in text for text in texts(result))
    assert added.structured_content == {"sum": 42}
    assert any("42" in text for text in texts(added))


async def test_calling_a_template_tool_renders_the_arguments(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        result = await client.call_tool("greet", {"name": "Ada"})
    assert not result.is_error
    assert texts(result) == ["Hello, Ada!"]


async def test_tl10_tl11_show_logo_returns_image_resource_link_and_embedded_resource(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        result = await client.call_tool("show_logo", {})
    assert not result.is_error
    kinds = [block.type for block in result.content]
    assert kinds[0] == "text"
    assert {"image", "resource_link", "resource"} <= set(kinds)
    image = next(block for block in result.content if block.type == "image")
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)
    link = next(block for block in result.content if block.type == "resource_link")
    assert str(link.uri) == "demo://readme"
    embedded = next(block for block in result.content if block.type == "resource")
    assert str(embedded.resource.uri) == "demo://readme"
    assert embedded.resource.text


async def test_calling_an_http_tool_posts_the_arguments_to_the_upstream_and_returns_its_json(
    server: DaphneServer, upstream: Upstream
) -> None:
    before = len(upstream.requests)
    arguments = {"city": "Lisbon", "days": 3}
    async with mcp_client(server.mcp_url()) as client:
        result = await client.call_tool("fetch_json", arguments)
    assert not result.is_error, texts(result)
    assert result.structured_content == {"upstream": "e2e", "received": arguments}
    sent = upstream.requests[before:]
    assert len(sent) == 1
    assert json.loads(sent[0]["body"]) == arguments


async def test_tl06_calling_an_unknown_tool_is_invalid_params(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        with pytest.raises(MCPError) as error:
            await client.call_tool("no_such_tool", {})
    assert error.value.code == INVALID_PARAMS


async def test_ut20_ut22_count_slowly_sends_increasing_progress_and_log_messages_before_its_result(
    server: DaphneServer,
) -> None:
    inbox = Inbox()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with mcp_client(server.mcp_url(), inbox) as client:
        await client.set_logging_level("info")
        result = await client.call_tool(
            "count_slowly", {"n": 5, "delay": 0.02}, progress_callback=on_progress
        )
    assert not result.is_error
    assert result.structured_content == {"count": 5}
    assert [value for value, _, _ in progress] == [1, 2, 3, 4, 5]
    assert {total for _, total, _ in progress} == {5}
    assert all(message for _, _, message in progress)
    counted = [log for log in inbox.logs if log.level == "info" and "count" in str(log.data)]
    assert len(counted) == 5, inbox.logs


async def test_lg02_after_set_level_only_messages_at_or_above_that_level_arrive(server: DaphneServer) -> None:
    inbox = Inbox()
    async with mcp_client(server.mcp_url(), inbox) as client:
        await client.set_logging_level("warning")
        await client.call_tool("count_slowly", {"n": 3, "delay": 0})
        assert inbox.logs == []  # count_slowly logs at info, below warning
        await client.set_logging_level("debug")
        await client.call_tool("count_slowly", {"n": 3, "delay": 0})
    assert [log.level for log in inbox.logs] == ["info"] * 3
    assert all(log.logger == "count_slowly" for log in inbox.logs)


async def test_pr01_pr02_prompts_list_and_get_render_the_arguments(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
        review = await client.get_prompt("code_review", {"code": "print(1)", "language": "python"})
        default = await client.get_prompt("code_review", {"code": "x = 1"})
        logo = await client.get_prompt("describe_logo")
    assert {"code_review", "describe_logo"} <= set(prompts)
    arguments = {argument.name: argument for argument in prompts["code_review"].arguments}
    assert arguments["code"].required is True
    assert not arguments["language"].required
    assert review.messages[0].role == "user"
    assert review.messages[0].content.text == "Please review this python:\nprint(1)"
    assert default.messages[0].content.text == "Please review this code:\nx = 1"
    kinds = [message.content.type for message in logo.messages]
    assert "image" in kinds and "resource" in kinds


async def test_pr04_getting_a_prompt_without_a_required_argument_is_invalid_params(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        with pytest.raises(MCPError) as error:
            await client.get_prompt("code_review", {"language": "python"})
    assert error.value.code == INVALID_PARAMS


async def test_rs01_rs02_resources_list_and_read_text_and_binary(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        listed = {str(resource.uri): resource for resource in (await client.list_resources()).resources}
        readme = await client.read_resource("demo://readme")
        logo = await client.read_resource("demo://logo.png")
        config = await client.read_resource("demo://config.json")
    assert {"demo://readme", "demo://logo.png", "demo://config.json"} <= set(listed)
    assert listed["demo://logo.png"].mime_type == "image/png"
    assert readme.contents[0].mime_type == "text/markdown"
    assert readme.contents[0].text
    assert logo.contents[0].mime_type == "image/png"
    assert base64.b64decode(logo.contents[0].blob).startswith(PNG_SIGNATURE)
    assert isinstance(json.loads(config.contents[0].text), dict)


async def test_rs03_reading_a_templated_uri_renders_the_template(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        templates = (await client.list_resource_templates()).resource_templates
        profile = await client.read_resource("demo://users/42/profile")
    assert "demo://users/{user_id}/profile" in {template.uri_template for template in templates}
    assert str(profile.contents[0].uri) == "demo://users/42/profile"
    assert json.loads(profile.contents[0].text) == {"user_id": "42", "name": "User 42"}


async def test_rs07_reading_an_unknown_uri_is_resource_not_found(server: DaphneServer) -> None:
    async with mcp_client(server.mcp_url()) as client:
        with pytest.raises(MCPError) as error:
            await client.read_resource("demo://nothing-here")
    assert error.value.code == RESOURCE_NOT_FOUND


async def test_cp01_completion_offers_prompt_argument_and_template_variable_values(
    server: DaphneServer,
) -> None:
    async with mcp_client(server.mcp_url()) as client:
        language = await client.complete(
            PromptReference(type="ref/prompt", name="code_review"), {"name": "language", "value": "py"}
        )
        user_id = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="demo://users/{user_id}/profile"),
            {"name": "user_id", "value": "4"},
        )
    assert language.completion.values == ["python"]
    assert user_id.completion.values == ["42"]
