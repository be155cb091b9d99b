"""The official SDK client in its default `auto` mode speaks 2026-07-28 to every tenant, statelessly.

Real Daphne processes; the same URL keeps serving `legacy` clients (the other e2e files pin them).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference, ResourceTemplateReference

from mcp_app.core import versions
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from tests.e2e.helpers import REQUEST_SECONDS, AdminBrowser, Reports
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer
from tests.e2e.test_live_changes import edit_resource_elsewhere, tool_pk

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


class Wire:
    """Every HTTP exchange the client made: method, JSON-RPC method, status, response headers."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[str, str | None, int, dict[str, str]]] = []
        self.sent_headers: list[dict[str, str]] = []

    async def on_response(self, response: httpx2.Response) -> None:
        rpc = None
        if response.request.method == "POST":
            try:
                rpc = json.loads(response.request.content).get("method")
            except (ValueError, AttributeError):
                rpc = None
        self.exchanges.append((response.request.method, rpc, response.status_code, dict(response.headers)))
        self.sent_headers.append({k.lower(): v for k, v in response.request.headers.items()})

    def rpc_methods(self) -> list[str | None]:
        return [rpc for _, rpc, _, _ in self.exchanges]


async def modern_client(url: str, wire: Wire, **options: Any) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0), event_hooks={"response": [wire.on_response]}
    )
    client = Client(
        streamable_http_client(url, http_client=http),
        read_timeout_seconds=REQUEST_SECONDS,
        cache=None,
        **options,
    )
    return client, http


async def test_auto_mode_discovers_2026_07_28_and_never_initializes_nor_gets_a_session(
    server: DaphneServer,
) -> None:
    wire = Wire()
    client, http = await modern_client(server.mcp_url(), wire)
    async with http, client:
        assert client.protocol_version == versions.V2026_07_28
        discovered = client.session.discover_result
        assert discovered is not None
        assert discovered.supported_versions == list(versions.ALL_VERSIONS)
        assert discovered.capabilities.tools is not None and discovered.capabilities.prompts is not None
        assert client.server_info is not None and client.server_info.name == "demo"
        assert client.instructions
        await client.list_tools()
        await client.call_tool("echo", {"message": "hi"})
    methods = wire.rpc_methods()
    assert methods[0] == "server/discover"
    assert "initialize" not in methods and "notifications/initialized" not in methods
    assert all(method == "POST" for method, _, _, _ in wire.exchanges)  # no GET stream, no DELETE
    assert not any("mcp-session-id" in headers for _, _, _, headers in wire.exchanges)


async def test_every_primitive_answers_a_stateless_client(server: DaphneServer) -> None:
    client, http = await modern_client(server.mcp_url(), Wire())
    async with http, client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "add", "greet", "count_slowly"} <= tools
        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert added.structured_content == {"sum": 42}
        prompt = await client.get_prompt("code_review", {"code": "print(1)"})
        assert "print(1)" in json.dumps(prompt.model_dump(mode="json"))
        readme = await client.read_resource("demo://readme")
        assert readme.contents[0].text.startswith("# Demo")
        profile = await client.read_resource("demo://users/42/profile")
        assert "42" in profile.contents[0].text
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["demo://users/{user_id}/profile"]
        ref = ResourceTemplateReference(type="ref/resource", uri="demo://users/{user_id}/profile")
        completed = await client.complete(ref, {"name": "user_id", "value": ""})
        assert completed.completion.values
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert "code_review" in prompts
        language = await client.complete(
            PromptReference(type="ref/prompt", name="code_review"), {"name": "language", "value": "py"}
        )
        assert language.completion.values


async def test_progress_and_log_messages_ride_the_calls_own_stream_at_the_level_asked(
    server: DaphneServer,
) -> None:
    reports, wire = Reports(), Wire()
    client, http = await modern_client(
        server.mcp_url(), wire, logging_callback=reports.on_log, log_level="info"
    )
    async with http, client:
        result = await client.call_tool(
            "count_slowly", {"n": 3, "delay": 0.01}, progress_callback=reports.on_progress
        )
    assert result.content[0].text == "Counted to 3."
    assert reports.progress == [1.0, 2.0, 3.0]
    assert [entry.data for entry in reports.logs] == ["count 1 of 3", "count 2 of 3", "count 3 of 3"]
    streamed = [h for _, rpc, _, h in wire.exchanges if rpc == "tools/call"]
    assert streamed and streamed[0]["content-type"].startswith("text/event-stream")


async def test_a_request_without_a_log_level_gets_no_log_message(server: DaphneServer) -> None:
    reports = Reports()
    client, http = await modern_client(server.mcp_url(), Wire(), logging_callback=reports.on_log)
    async with http, client:
        await client.call_tool("count_slowly", {"n": 2, "delay": 0.01})
    assert reports.logs == []


@pytest.mark.parametrize("name", ["Ada", "Zoë Ångström", " padded "])
async def test_a_mirrored_argument_travels_as_its_mcp_param_header_and_the_server_checks_it(
    server: DaphneServer, name: str
) -> None:
    # The demo's greet marks `name` with x-mcp-header "Name": the SDK mirrors it (base64 when needed).
    wire = Wire()
    client, http = await modern_client(server.mcp_url(), wire)
    async with http, client:
        await client.list_tools()  # the SDK learns which arguments to mirror from the listing
        result = await client.call_tool("greet", {"name": name})
    assert result.content[0].text == f"Hello, {name}!"
    sent = [headers for headers in wire.sent_headers if headers.get("mcp-method") == "tools/call"]
    assert sent and "mcp-param-name" in sent[0]
    assert (sent[0]["mcp-param-name"] == name) == (name == "Ada")  # others are base64-wrapped


async def test_an_unknown_resource_is_invalid_params_naming_the_uri(server: DaphneServer) -> None:
    client, http = await modern_client(server.mcp_url(), Wire())
    async with http, client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("demo://nothing-here")
    assert caught.value.error.code == INVALID_PARAMS
    assert caught.value.error.data == {"uri": "demo://nothing-here"}


async def test_lists_and_reads_carry_the_tenants_caching_hints(server: DaphneServer) -> None:
    wire = Wire()
    client, http = await modern_client(server.mcp_url(), wire)
    async with http, client:
        listed = await client.list_tools()
        read = await client.read_resource("demo://readme")
    for result in (listed, read):
        assert result.ttl_ms == 60_000
        assert result.cache_scope == "public"  # the demo tenant is public


async def listen_to_an_admin_edit(
    listener: DaphneServer, admin_server: DaphneServer, tool: str, **extra: Any
) -> None:
    """Listen on `listener` with the SDK, edit `tool`'s description in `admin_server`'s admin, then check
    the listener heard tools/list_changed and serves the edit; `extra` adds to the listen filter."""
    pk = tool_pk(admin_server.env, tool)
    description = f"Edited while listening ({secrets.token_hex(4)})."
    async with (
        Client(listener.mcp_url(), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client,
        AdminBrowser(admin_server.url) as admin,
    ):
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert client.protocol_version == versions.V2026_07_28
        async with client.listen(tools_list_changed=True, **extra) as sub:
            assert sub.honored.tools_list_changed is True
            assert not sub.honored.resource_subscriptions  # extra URIs in these tests name no resource
            await admin.change(f"/admin/mcp_app/tool/{pk}/change/", "tool_form", {"description": description})
            with anyio.fail_after(REQUEST_SECONDS):
                event = await sub.__anext__()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert tools[tool].description == description  # served at once by the process that announced it


async def test_listen_receives_an_admin_edit_and_is_promised_only_uris_the_tenant_serves(
    server: DaphneServer,
) -> None:
    await listen_to_an_admin_edit(server, server, "greet", resource_subscriptions=["demo://nowhere"])


@pytest.mark.services(reason="the edit is made by another process and reaches Daphne through Redis")
async def test_listen_on_one_daphne_hears_an_admin_edit_made_through_another_daphne(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    await listen_to_an_admin_edit(server, server_b, "add")


@pytest.mark.services(reason="the edit is made by another process and reaches Daphne through Redis")
async def test_listen_on_one_daphne_hears_a_resource_edited_by_another_process(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    marker = secrets.token_hex(4)
    client, http = await modern_client(server.mcp_url(), Wire())
    async with http, client:
        async with client.listen(resource_subscriptions=["demo://readme"]) as sub:
            assert sub.honored.resource_subscriptions == ["demo://readme"]
            # config.json first: not subscribed, so nothing about it may arrive.
            await edit_resource_elsewhere(server_b.env, "demo://config.json", marker)
            await edit_resource_elsewhere(server_b.env, "demo://readme", marker)
            with anyio.fail_after(REQUEST_SECONDS):
                event = await sub.__anext__()
        readme = await client.read_resource("demo://readme")
    assert type(event).__name__ == "ResourceUpdated" and str(event.uri) == "demo://readme"
    assert marker in readme.contents[0].text
