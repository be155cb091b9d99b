"""The Try page's drawing of a result as a client shows it, and its sentence per kind (AMB-251)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcp_app.admin.try_render import MAX_ROWS, table, view, what_happens
from mcp_app.core.types import ToolDef

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def result(*content: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": {"content": list(content), **more}}


def test_each_content_type_becomes_the_block_a_client_draws():
    shown = view(
        result(
            {"type": "text", "text": "Hello"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "demo://readme", "name": "readme", "title": "Read me"},
            {"type": "resource", "resource": {"uri": "demo://a", "mimeType": "text/plain", "text": "A"}},
            {"type": "resource", "resource": {"uri": "demo://b", "blob": "AAAA"}},
            {"type": "something_new", "x": 1},
        )
    )
    kinds = [block["kind"] for block in shown["blocks"]]
    assert kinds == ["text", "image", "audio", "resource_link", "resource", "resource", "json"]
    image, audio, link, text_resource, binary = shown["blocks"][1:6]
    assert image["src"] == f"data:image/png;base64,{PNG}"
    assert audio["src"] == "data:audio/wav;base64,UklGRg=="
    assert link["name"] == "Read me" and link["uri"] == "demo://readme"
    assert text_resource["text"] == "A" and not text_resource["binary"]
    assert binary["binary"] and binary["text"] == ""
    assert not shown["is_error"] and not shown["protocol_error"] and "table" not in shown


@pytest.mark.parametrize(
    "item",
    [
        {"type": "image", "data": PNG, "mimeType": "text/html"},  # not an image type
        {"type": "image", "data": PNG, "mimeType": "image/png;x=1"},  # no parameters smuggled in
        {"type": "audio", "data": PNG, "mimeType": "image/png"},  # an audio block claims an image
        {"type": "image", "data": 'x" onerror="alert(1)', "mimeType": "image/png"},  # not base64
        {"type": "image", "mimeType": "image/png"},
    ],
)
def test_a_media_block_that_is_not_base64_of_its_own_type_is_never_a_url(item):
    (block,) = view(result(item))["blocks"]
    assert block["kind"] == "note" and "src" not in block


def test_structured_content_is_a_table():
    assert table({"sum": 42}) == {"columns": ["sum"], "rows": [["42"]], "more": 0}
    rows = [{"name": "a", "n": 1}, {"name": "b", "tags": ["x"]}]
    assert table(rows) == {"columns": ["name", "n", "tags"], "rows": [["a", "1", ""], ["b", "", '["x"]']], "more": 0}
    assert table({"items": rows})["columns"] == ["name", "n", "tags"]  # one list of objects: its rows
    assert table([2, 3, 5]) == {"columns": ["value"], "rows": [["[2, 3, 5]"]]}
    assert table("plain") == {"columns": ["value"], "rows": [["plain"]]}
    many = table([{"i": i} for i in range(MAX_ROWS + 5)])
    assert len(many["rows"]) == MAX_ROWS and many["more"] == 5
    assert view(result(structuredContent={"sum": 42}))["table"]["rows"] == [["42"]]


def test_is_error_and_protocol_errors_are_marked_and_a_missing_capability_is_explained():
    assert view(result({"type": "text", "text": "no"}, isError=True))["is_error"]
    refused = view(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32021, "message": "This needs sampling.", "data": {"requiredCapabilities": {"sampling": {}}}},
        }
    )
    assert refused["protocol_error"] and refused["blocks"] == [{"kind": "error", "text": "This needs sampling."}]
    assert refused["explain"].startswith("Every client that does not declare sampling gets this same answer.")
    other = view({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool: x"}})
    assert "explain" not in other and other["blocks"][0]["text"] == "Unknown tool: x"


TOOL = ToolDef(
    id=1, name="t", title="", description="", input_schema={}, output_schema=None, annotations={},
    icons=[], meta={}, handler="template", handler_config={"text": "hi"},
)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "config", "says"),
    [
        ("template", {"text": "hi"}, "A template tool fills its text with the arguments: nothing leaves"),
        ("http", {"url": "https://api.example.com/x"}, "An http tool sends its request to api.example.com"),
        ("python", {"callable": "echo"}, "A python tool runs the callable 'echo' on the server."),
        ("form", {"fields": {}}, "A form tool asks the person to fill its form"),
        ("llm", {"prompt": "p"}, "An llm tool asks the client's own model (sampling)"),
        ("llm", {"prompt": "p", "endpoint": {"url": "https://llm.example.com/v1"}}, "its endpoint at llm.example.com"),
        ("upstream", {"upstream": "crm", "tool": "find"}, "calls 'find' on the upstream server 'crm'"),
    ],
)
def test_what_running_does_is_said_for_the_tools_own_kind(kind, config, says):
    sentence = what_happens(replace(TOOL, handler=kind, handler_config=config))
    assert says in sentence
    assert ("http" in sentence) == (kind == "http")  # never the http sentence for another kind
