"""Each handler kind's example (admin/kind_examples.py): valid for its kind, and it runs as it is (AMB-260)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from mcp_app.admin import kind_examples
from mcp_app.handlers import registry
from mcp_app.models import Tool
from tests.protocol.support import result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = ("template", "http", "form", "llm", "python")


@pytest.fixture(autouse=True)
async def _close_worker_connections() -> Any:
    yield
    await sync_to_async(connections.close_all)()  # the catalog's worker thread keeps its own


@pytest.fixture
def echo_served(live_server, settings) -> str:
    """This platform served on 127.0.0.1 (its demo echo endpoint there) and allowed by the SSRF policy."""
    settings.MCP_PUBLIC_URL = f"http://127.0.0.1:{live_server.thread.port}"
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    return settings.MCP_PUBLIC_URL


def test_every_kind_a_person_writes_has_an_example_and_upstream_has_none():
    assert set(kind_examples.examples()) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_example_passes_its_kinds_checks_and_the_models_full_clean(kind, tenant_a, echo_served):
    example = kind_examples.examples()[kind]
    assert registry.config_problems(kind, example.handler_config) == []
    tool = Tool(
        tenant=tenant_a,
        name=f"example_{kind}",
        handler=kind,
        handler_config=example.handler_config,
        input_schema=example.input_schema,
    )
    tool.full_clean()
    assert example.note


def test_the_http_example_calls_this_platforms_echo_when_the_ssrf_policy_admits_it(settings):
    settings.MCP_PUBLIC_URL = "http://127.0.0.1:8000"
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    assert kind_examples.echo_url() == "http://127.0.0.1:8000/demo/echo"
    settings.MCP_HTTP_HANDLER_ALLOW = []
    url = kind_examples.examples()["http"].handler_config["url"]
    assert url == kind_examples.PUBLIC_ECHO_URL
    assert registry.config_problems("http", kind_examples.examples()["http"].handler_config) == []


def test_the_python_callables_are_offered_with_their_docstrings():
    docs = kind_examples.callable_docs()
    assert docs["add"] == 'Return a + b as text and as structuredContent {"sum": a + b}.'
    assert kind_examples.examples()["python"].handler_config == {"callable": "echo"}


def person(ask: dict[str, Any]) -> dict[str, Any]:
    """The client's part: a model's reply to sampling, a person's answers to a form."""
    if ask["method"] == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "MCP describes tools."},
            "model": "m",
        }
    assert ask["method"] == "elicitation/create", ask
    return {"action": "accept", "content": {"mood": "good", "score": 4}}


async def call(ctx: Any, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    """tools/call as a 2026-07-28 client answering each question as `person` does: (result, questions)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    asked: list[dict] = []
    result = await result_of(ctx, "tools/call", params)
    while result.get("resultType") == "input_required":
        asked += result["inputRequests"].values()
        answers = {key: person(ask) for key, ask in result["inputRequests"].items()}
        params = {**params, "requestState": result["requestState"], "inputResponses": answers}
        result = await result_of(ctx, "tools/call", params)
    return result, asked


@sync_to_async
def create_tools(tenant: Any) -> dict[str, Any]:
    made = {}
    for kind, example in kind_examples.examples().items():
        tool = Tool(
            tenant=tenant,
            name=f"example_{kind}",
            handler=kind,
            handler_config=example.handler_config,
            input_schema=example.input_schema,
        )
        tool.full_clean()
        tool.save()
        made[kind] = example
    return made


async def test_a_tool_made_from_each_example_runs_through_the_dispatcher_with_its_arguments(
    tenant_a, echo_served
):
    examples = await create_tools(tenant_a)
    capabilities = {"elicitation": {}, "sampling": {}}
    ctx = make_ctx(tenant_a, version="2026-07-28", session=None, client_capabilities=capabilities)
    results = {}
    for kind, example in examples.items():
        results[kind], asked = await call(ctx, f"example_{kind}", example.arguments)
        assert not results[kind].get("isError"), (kind, results[kind])
        if kind == "form":
            assert asked[0]["params"]["message"] == "How was your day, Ada?"
        if kind == "llm":
            sent = asked[0]["params"]
            assert sent["systemPrompt"] == "You are a concise assistant." and sent["maxTokens"] == 200
            assert "MCP lets a model call tools" in sent["messages"][0]["content"]["text"]
    assert results["template"]["content"] == [{"type": "text", "text": "Hello, Ada! HOW ARE YOU?"}]
    assert results["http"]["structuredContent"]["echo"] == {"city": "Lisbon"}
    assert results["form"]["content"][0]["text"] == "Ada feels good (4/5)."
    assert results["llm"]["content"][0]["text"] == "MCP describes tools."
    assert results["python"]["structuredContent"] == {"echo": "hello"}
