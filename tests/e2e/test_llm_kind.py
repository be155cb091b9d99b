"""An `llm` tool, defined without code, asks a model: the official SDK client's, or the tenant's endpoint.

Client's model: auto (2026-07-28) gets an InputRequiredResult with sampling/createMessage and the SDK
retries with its callback's answer; legacy gets the request on the call's stream and answers with a POST.
Endpoint: Daphne POSTs a chat completion to a stub on 127.0.0.1 (MCP_HTTP_HANDLER_ALLOW admits it in
the e2e environment) with the tool's encrypted key, and returns the stub's answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp import Client
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from tests.e2e.helpers import REQUEST_SECONDS, sdk_client, wait_until_served
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

ENDPOINT_ANSWER = "Stub model says: short."
ENDPOINT_KEY = "Bearer sk-e2e-only"


class CompletionsStub(ThreadingHTTPServer):
    """An OpenAI-compatible chat completions endpoint that records each request and answers one text."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CompletionsHandler)
        self.received: list[dict[str, Any]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1/chat/completions"


class _CompletionsHandler(BaseHTTPRequestHandler):
    server: CompletionsStub

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append(
            {"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}
        )
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": ENDPOINT_ANSWER},
            "finish_reason": "stop",
        }
        reply = json.dumps({"id": "c-1", "object": "chat.completion", "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the test output clean
        return


@pytest.fixture(scope="module")
def completions() -> Iterator[CompletionsStub]:
    stub = CompletionsStub()
    threading.Thread(target=stub.serve_forever, name="e2e-completions", daemon=True).start()
    yield stub
    stub.shutdown()
    stub.server_close()


@pytest.fixture(scope="module")
def llm_tools(server: DaphneServer, completions: CompletionsStub) -> Iterator[None]:
    """Two llm tools of the demo tenant: one asks the client's model, one the stub endpoint."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    sampling = {
        "prompt": "Summarise in one sentence: {{ text }}",
        "system": "You are terse.",
        "max_tokens": 60,
    }
    endpoint = {**sampling, "endpoint": {"url": completions.url, "model": "stub-1", "timeout": 5}}
    django_shell(
        server.env,
        "from mcp_app.handlers.secrets import encrypt_secrets\n"
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        "demo = Tenant.objects.get(slug='demo')\n"
        "Tool.objects.update_or_create(tenant=demo, name='llm_summarize_e2e', "
        f"defaults=dict(input_schema={schema!r}, handler='llm', handler_config={sampling!r}, timeout_seconds=60))\n"
        "Tool.objects.update_or_create(tenant=demo, name='llm_endpoint_e2e', "
        f"defaults=dict(input_schema={schema!r}, handler='llm', handler_config={endpoint!r}, timeout_seconds=30, "
        f"handler_secrets=encrypt_secrets({{'Authorization': {ENDPOINT_KEY!r}}})))\n",
    )
    # Both were saved before this one appears, so the catalog that lists it lists both.
    wait_until_served(server.mcp_url(), "llm_endpoint_e2e")
    yield
    django_shell(
        server.env,
        "from mcp_app.models import Tool\n"
        "Tool.objects.filter(name__in=['llm_summarize_e2e', 'llm_endpoint_e2e']).delete()\n",
    )
    wait_until_served(server.mcp_url(), "llm_endpoint_e2e", present=False)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_clients_model_is_asked_the_filled_prompt_and_the_tool_returns_its_text(
    server: DaphneServer, llm_tools: None, mode: str
) -> None:
    asked: list[CreateMessageRequestParams] = []

    async def model(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(
            role="assistant", content=TextContent(text="Cats sit."), model="e2e-model", stop_reason="endTurn"
        )

    async with sdk_client(server.mcp_url(), mode, sampling_callback=model) as client:
        result = await client.call_tool("llm_summarize_e2e", {"text": "The cat sat on the mat."})
    [params] = asked
    assert [(m.role, m.content.text) for m in params.messages] == [
        ("user", "Summarise in one sentence: The cat sat on the mat.")
    ]
    assert (params.system_prompt, params.max_tokens) == ("You are terse.", 60)
    assert not result.is_error
    assert [block.text for block in result.content] == ["Cats sit."]


async def test_a_tool_with_an_endpoint_posts_the_prompt_with_its_secret_key_and_returns_the_answer(
    server: DaphneServer, llm_tools: None, completions: CompletionsStub
) -> None:
    async with Client(server.mcp_url(), read_timeout_seconds=REQUEST_SECONDS, cache=None) as client:
        result = await client.call_tool("llm_endpoint_e2e", {"text": "The cat sat on the mat."})
    assert not result.is_error, result.content
    assert [block.text for block in result.content] == [ENDPOINT_ANSWER]
    [request] = completions.received
    assert request["headers"]["Authorization"] == ENDPOINT_KEY
    assert request["body"] == {
        "model": "stub-1",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarise in one sentence: The cat sat on the mat."},
        ],
        "max_tokens": 60,
    }
