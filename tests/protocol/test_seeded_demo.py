"""The demo tenant as `seed_demo` creates it and `./bin/serve` serves it: every tool answers, offline."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from mcp_app.core import ui_apps
from tenants.models import Tenant
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

SERVE = Path(__file__).resolve().parents[2] / "bin" / "serve"

# What a new user might send each demo tool first; every seeded tool must be listed here.
ARGUMENTS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hi"},
    "add": {"a": 2, "b": 3},
    "greet": {"name": "Ada"},
    "show_logo": {},
    "count_slowly": {"n": 2, "delay": 0},
    "count_in_background": {"n": 2, "delay": 0},
    "fetch_json": {"hello": "echo"},
    "stream_count": {"n": 2, "delay": 0},
    "ask_user": {},
    "show_roots": {},
    "delete_note": {"note": "groceries"},
    "summarize": {"text": "A long text."},
    "roll_dice": {"dice": 2},
    "roll_again": {"dice": 1, "sides": 20},  # only the dice app's client sees it (MCP Apps, AMB-273)
}
# Their endpoints wait on their stream for the answer the platform posts back, and live_server (WSGI)
# sends a stream only whole: tests/e2e/test_conformance_tools.py calls them through Daphne.
THROUGH_DAPHNE = {"ask_everything", "greet_in_a_task"}
# Fails on purpose, at the protocol level (AMB-285): the call's answer is this JSON-RPC error.
FAILS = {"fail_on_purpose": -32603}
ROOTS = {"roots": [{"uri": "file:///home/ada/project", "name": "project"}]}


def serve_default(name: str) -> str:
    """What bin/serve exports as `name` when the environment leaves it unset ('' when it exports none)."""
    pattern = rf'^export {name}="\$\{{{name}:?-([^}}]*)\}}"$'
    match = re.search(pattern, SERVE.read_text(), re.MULTILINE)
    return match.group(1) if match else ""


def test_bin_serve_gives_the_public_url_of_its_own_port():
    assert serve_default("MCP_PUBLIC_URL") == "http://127.0.0.1:$port"


@pytest.fixture
def served_demo(live_server, settings) -> Tenant:
    """The demo tenant seeded under bin/serve's settings, this platform served on 127.0.0.1 (live_server)."""
    port = live_server.thread.port
    settings.MCP_PUBLIC_URL = serve_default("MCP_PUBLIC_URL").replace("$port", str(port))
    # As settings.py reads the variable: comma-separated, empty when bin/serve stops setting it.
    allow = serve_default("MCP_HTTP_HANDLER_ALLOW")
    settings.MCP_HTTP_HANDLER_ALLOW = [item.strip() for item in allow.split(",") if item.strip()]
    # bin/serve without Redis runs every tool in-process; with Redis it starts a Celery worker, the
    # path tests/e2e/test_demo_tools.py covers. This process has no worker, so: in-process.
    settings.MCP_BACKGROUND_TOOLS = "inline"
    call_command("seed_demo", "--tenant-only", stdout=io.StringIO())
    return Tenant.objects.get(slug="demo")


def answer(ask: dict[str, Any]) -> dict[str, Any]:
    """What a client answers: ROOTS, a model's "A summary.", or every form field filled with "Ada"."""
    if ask["method"] == "roots/list":
        return ROOTS
    if ask["method"] == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "A summary."}, "model": "m"}
    fields = ask["params"]["requestedSchema"]["properties"]
    return {"action": "accept", "content": {field: "Ada" for field in fields}}


async def call_answering_forms(ctx: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """tools/call as a 2026-07-28 client that answers every question as `answer` does."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    result = await result_of(ctx, "tools/call", params)
    while result.get("resultType") == "input_required":
        answers = {key: answer(ask) for key, ask in result["inputRequests"].items()}
        params = {**params, "requestState": result["requestState"], "inputResponses": answers}
        result = await result_of(ctx, "tools/call", params)
    return result


# live_server is WSGI: it reads stream_count's streamed demo endpoint (an async iterator, for Daphne) at once.
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
async def test_every_seeded_demo_tool_answers_without_an_error_under_bin_serve_settings(served_demo):
    apps = {ui_apps.EXTENSION: {"mimeTypes": [ui_apps.MIME_TYPE]}}
    capabilities = {"elicitation": {}, "roots": {}, "sampling": {}, "extensions": apps}
    ctx = make_ctx(served_demo, version="2026-07-28", session=None, client_capabilities=capabilities)
    listed = {tool["name"] for tool in (await result_of(ctx, "tools/list"))["tools"]}
    assert listed == set(ARGUMENTS) | THROUGH_DAPHNE | set(FAILS)
    for name, code in FAILS.items():
        assert (await error_of(ctx, "tools/call", {"name": name, "arguments": {}}))["code"] == code
    for name, arguments in ARGUMENTS.items():
        result = await call_answering_forms(ctx, name, arguments)
        assert not result.get("isError"), (name, result["content"])
    assert (await call_answering_forms(ctx, "ask_user", {}))["content"][0][
        "text"
    ] == "Hello, Ada! Nice to meet you."
    shown = await call_answering_forms(ctx, "show_roots", {})
    assert "file:///home/ada/project (project)" in shown["content"][0]["text"]
    summary = await call_answering_forms(ctx, "summarize", {"text": "A long text."})
    assert summary["content"][0]["text"] == "A summary."
    deleted = await call_answering_forms(ctx, "delete_note", {"note": "groceries"})
    assert deleted["content"][0]["text"] == "Deleted groceries."


async def test_the_seeded_fetch_json_posts_to_this_platforms_echo_and_returns_its_reply(served_demo):
    arguments = {"hello": "echo", "n": [1, 2]}
    result = await result_of(
        make_ctx(served_demo), "tools/call", {"name": "fetch_json", "arguments": arguments}
    )
    assert not result.get("isError"), result["content"]
    assert result["structuredContent"]["echo"] == arguments
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
async def test_the_demo_in_search_mode_finds_every_tool_by_name_and_calls_each_through_call_tool(served_demo):
    """Switched to search mode (AMB-376), the demo still does everything: each tool found first by its
    name, all of them browsed, each called through call_tool, its questions answered (MRTR rounds)."""
    served_demo.tool_discovery = "search"
    await served_demo.asave()
    apps = {ui_apps.EXTENSION: {"mimeTypes": [ui_apps.MIME_TYPE]}}
    capabilities = {"elicitation": {}, "roots": {}, "sampling": {}, "extensions": apps}
    ctx = make_ctx(served_demo, version="2026-07-28", session=None, client_capabilities=capabilities)
    listed = [tool["name"] for tool in (await result_of(ctx, "tools/list"))["tools"]]
    assert listed == ["browse_tools", "call_tool", "search_tools"]
    browsed = await call_answering_forms(ctx, "browse_tools", {})
    assert {t["name"] for t in browsed["structuredContent"]["tools"]} == set(
        ARGUMENTS
    ) | THROUGH_DAPHNE | set(FAILS)
    for name, arguments in ARGUMENTS.items():
        found = await call_answering_forms(ctx, "search_tools", {"query": name})
        assert found["structuredContent"]["tools"][0]["name"] == name
        result = await call_answering_forms(ctx, "call_tool", {"name": name, "arguments": arguments})
        assert not result.get("isError"), (name, result["content"])
    asked = await call_answering_forms(ctx, "call_tool", {"name": "ask_user", "arguments": {}})
    assert asked["content"][0]["text"] == "Hello, Ada! Nice to meet you."
    failed = await error_of(
        ctx, "tools/call", {"name": "call_tool", "arguments": {"name": "fail_on_purpose"}}
    )
    assert failed["code"] == FAILS["fail_on_purpose"]
