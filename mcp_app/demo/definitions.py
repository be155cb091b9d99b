"""The `demo` tenant (public): its tools, prompts, resources and template, as data, and its seeding."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

from django.conf import settings

from mcp_app.demo.texts import instructions, readme
from mcp_app.demo.upsert import Counts, upsert
from mcp_app.demo.views import STREAM_MAX_DELAY, STREAM_MAX_N
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tenants.models import Tenant

DEMO_SLUG = "demo"
# fetch_json posts to the platform's own demo echo endpoint (mcp_app.demo.views): the http handler
# works end to end with no outside service. bin/serve lets the http handler reach 127.0.0.1 for it.
ECHO_PATH = "/demo/echo"
# stream_count's endpoint: it streams its progress as events (handlers/http_stream.py), no code.
STREAM_PATH = "/demo/stream"


def fetch_json_url() -> str:
    return settings.MCP_PUBLIC_URL + ECHO_PATH


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def demo_logo_png(size: int = 16) -> bytes:
    """Return a small valid RGB PNG: a blue square with an orange diagonal."""
    rows = []
    for y in range(size):
        row = bytearray([0])  # filter type 0 (None) for every scanline
        for x in range(size):
            row += bytes((255, 140, 0)) if x == y or x == size - 1 - y else bytes((30, 90, 200))
        rows.append(bytes(row))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + _png_chunk(b"IEND", b"")
    )


CONFIG_JSON = (
    '{\n  "theme": "light",\n  "features": ["tools", "prompts", "resources"],\n  "maxItems": 50\n}\n'
)


def _count_tool(
    name: str, title: str, description: str, n: int, delay: float, execution: str = "inline"
) -> dict[str, Any]:
    """A demo tool running the `count_slowly` callable, with its own defaults and execution."""
    return {
        "name": name,
        "title": title,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 50, "default": n},
                "delay": {"type": "number", "minimum": 0, "maximum": 5, "default": delay},
            },
            "additionalProperties": False,
        },
        "output_schema": None,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": "python",
        "handler_config": {"callable": "count_slowly"},
        "timeout_seconds": 300,
        "execution": execution,
    }


def _string_schema(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
        "additionalProperties": False,
    }


def demo_definitions(logo: bytes) -> dict[str, list[dict[str, Any]]]:
    """Return the demo tenant's rows as field dicts, keyed by model ."""
    icon = {
        "src": "data:image/png;base64," + base64.b64encode(logo).decode(),
        "mimeType": "image/png",
        "sizes": ["16x16"],
    }
    tools = [
        {
            "name": "echo",
            "title": "Echo",
            "description": "Return the message unchanged.",
            "input_schema": _string_schema("message", "Text to echo back."),
            "output_schema": {
                "type": "object",
                "properties": {"echo": {"type": "string"}},
                "required": ["echo"],
            },
            "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
            "handler": "python",
            "handler_config": {"callable": "echo"},
        },
        {
            "name": "add",
            "title": "Add two integers",
            "description": "Return the sum of a and b.",
            "input_schema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
            "output_schema": {
                "type": "object",
                "properties": {"sum": {"type": "integer"}},
                "required": ["sum"],
            },
            "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
            "handler": "python",
            "handler_config": {"callable": "add"},
        },
        {
            "name": "greet",
            "title": "Greet someone",
            "description": "Say hello to a person by name.",
            # x-mcp-header: 2026-07-28 clients also send the name as `Mcp-Param-Name`, so a proxy can
            # route on it; the server checks the header equals the argument.
            "input_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Who to greet.", "x-mcp-header": "Name"}
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "output_schema": None,
            "annotations": {"readOnlyHint": True},
            "icons": [icon],
            "handler": "template",
            "handler_config": {"text": "Hello, {{ name }}!"},
        },
        {
            "name": "show_logo",
            "title": "Show the demo logo",
            "description": "Return the logo as an image, with a link to and a copy of the readme.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "output_schema": None,
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "template",
            "handler_config": {
                "content": [
                    {"type": "text", "text": "Here is the demo logo."},
                    {"type": "image", "resource": "demo://logo.png"},
                    {"type": "resource_link", "uri": "demo://readme"},
                    {"type": "resource", "uri": "demo://readme"},
                ]
            },
        },
        _count_tool(
            "count_slowly",
            "Count slowly",
            "Count to n, one step every `delay` seconds, reporting progress and log messages.",
            n=3,
            delay=0.05,
        ),
        _count_tool(
            "count_in_background",
            "Count in the background",
            "Like count_slowly, but runs on a background worker: for long work. Cancellable.",
            n=10,
            delay=0.5,
            execution="background",
        ),
        {
            "name": "fetch_json",
            "title": "Fetch JSON",
            "description": (
                "POST the arguments as JSON to an HTTP endpoint and return its JSON reply. As seeded, the "
                'endpoint is this server\'s own /demo/echo, which answers {"echo": <the arguments>}, so '
                "the tool works with no outside network; an admin can point it at any API (its url)."
            ),
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": True},
            "output_schema": None,
            "annotations": {"readOnlyHint": False, "openWorldHint": True},
            "handler": "http",
            "handler_config": {"url": fetch_json_url(), "method": "POST", "timeout": 10},
        },
        {
            "name": "stream_count",
            "title": "Count on an endpoint",
            "description": (
                "Like count_in_background, with no code: an http tool whose endpoint (this server's own "
                "/demo/stream) streams its progress as newline-delimited JSON events, then its result."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 1, "maximum": STREAM_MAX_N, "default": 5},
                    "delay": {"type": "number", "minimum": 0, "maximum": STREAM_MAX_DELAY, "default": 0.3},
                },
                "additionalProperties": False,
            },
            "output_schema": None,
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "http",
            "handler_config": {"url": settings.MCP_PUBLIC_URL + STREAM_PATH, "method": "POST", "timeout": 10},
            "execution": "background",
        },
        {
            "name": "ask_user",
            "title": "Ask the user their name",
            "description": "Ask the person at the client for their name (a form), then greet them by it.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "output_schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "form",
            "handler_config": {
                "message": "What is your name?",
                "fields": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "title": "Your name", "minLength": 1}},
                    "required": ["name"],
                },
                "text": "Hello, {{ name }}! Nice to meet you.",
            },
            # The person takes their time: a form waits up to five minutes.
            "timeout_seconds": 300,
        },
        {
            "name": "show_roots",
            "title": "Show the client's roots",
            "description": "List the roots (folders, places) the client shares with this server.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "python",
            "handler_config": {"callable": "show_roots"},
        },
        {
            "name": "summarize",
            "title": "Summarise a text",
            "description": "Summarise a text in at most three sentences, using your client's own model "
            "(sampling): your client may show you the request before it runs.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "text": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 20000,
                        "description": "The text to summarise.",
                    }
                },
                "required": ["text"],
                "additionalProperties": False,
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "llm",
            "handler_config": {
                "system": "You summarise texts faithfully and briefly. Reply with the summary only.",
                "prompt": "Summarise this text in at most three sentences:\n\n{{ text }}",
                "max_tokens": 300,
            },
            # Leaves a legacy client's person time to review the request.
            "timeout_seconds": 120,
        },
        {
            "name": "delete_note",
            "title": "Delete a note",
            "description": "Delete a note by name. The person is asked to approve every time.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "note": {"type": "string", "minLength": 1, "description": "The note to delete."}
                },
                "required": ["note"],
                "additionalProperties": False,
            },
            "annotations": {"destructiveHint": True, "idempotentHint": True, "openWorldHint": False},
            "handler": "template",
            "handler_config": {"text": "Deleted {{ note }}."},
            "approval": "every_time",
            "timeout_seconds": 300,
        },
    ]
    prompts = [
        {
            "name": "code_review",
            "title": "Code review",
            "description": "Ask for a review of a piece of code.",
            "arguments": [
                {"name": "code", "description": "The code to review.", "required": True},
                {
                    "name": "language",
                    "description": "Programming language of the code.",
                    "required": False,
                    "completions": ["python", "javascript", "typescript", "go", "rust"],
                },
            ],
            "messages": [
                {
                    "role": "user",
                    "content": {
                        "type": "text",
                        "text": "Please review this {{ language|default:'code' }}:\n{{ code }}",
                    },
                }
            ],
        },
        {
            "name": "describe_logo",
            "title": "Describe the logo",
            "description": "Ask for a description of the demo logo, with the readme as context.",
            "arguments": [],
            "messages": [
                {"role": "user", "content": {"type": "image", "resource": "demo://logo.png"}},
                {"role": "user", "content": {"type": "resource", "uri": "demo://readme"}},
            ],
        },
    ]
    resources = [
        {"uri": "demo://readme", "name": "readme", "title": "Read me", "mime_type": "text/markdown", "text": "", "blob": None},
        {"uri": "demo://logo.png", "name": "logo.png", "title": "Demo logo", "mime_type": "image/png", "text": "", "blob": logo},
        {"uri": "demo://config.json", "name": "config.json", "title": "Demo configuration", "mime_type": "application/json", "text": CONFIG_JSON, "blob": None},
    ]  # fmt: skip
    templates = [
        {
            "uri_template": "demo://users/{user_id}/profile",
            "name": "user-profile",
            "title": "User profile",
            "description": "A made-up profile of a user, by id.",
            "mime_type": "application/json",
            "handler": "template",
            # The json filter quotes and escapes: a crafted URI cannot inject keys into the document.
            "handler_config": {
                "text": '{"user_id": {{ user_id|json }}, "name": {{ "User "|add:user_id|json }}}'
            },
            "completions": {"user_id": ["1", "2", "3", "42", "100"]},
        }
    ]
    definitions = {"tools": tools, "prompts": prompts, "resources": resources, "templates": templates}
    resources[0]["text"] = readme(definitions)
    return definitions


def seed_demo_tenant(reset: bool) -> dict[str, int]:
    """Create the missing demo tenant rows (reset: restore edited ones); count by outcome."""
    counts = Counts()
    count = counts.add
    definitions = demo_definitions(demo_logo_png())
    tenant, state = upsert(
        Tenant,
        {"slug": DEMO_SLUG},
        {
            "name": "demo",
            "title": "Demo MCP server",
            "description": "A demonstration tenant: tools, prompts and resources defined in the admin.",
            "instructions": instructions(definitions),
            "is_active": True,
            "auth_mode": "public",  # the demo is for trying a client at once, without OAuth
        },
        reset,
    )
    count(state)
    for values in definitions["tools"]:
        values = {"title": "", "icons": [], "meta": {}, "timeout_seconds": 30, "enabled": True, **values}
        count(upsert(Tool, {"tenant": tenant, "name": values.pop("name")}, values, reset)[1])
    for values in definitions["prompts"]:
        values = {"icons": [], "meta": {}, "enabled": True, **values}
        count(upsert(Prompt, {"tenant": tenant, "name": values.pop("name")}, values, reset)[1])
    for values in definitions["resources"]:
        values = {
            "description": "",
            "annotations": {},
            "icons": [],
            "meta": {},
            "enabled": True,
            **values,
        }
        count(upsert(Resource, {"tenant": tenant, "uri": values.pop("uri")}, values, reset)[1])
    for values in definitions["templates"]:
        values = {"annotations": {}, "icons": [], "meta": {}, "enabled": True, **values}
        count(
            upsert(
                ResourceTemplate,
                {"tenant": tenant, "uri_template": values.pop("uri_template")},
                values,
                reset,
            )[1]
        )
    return counts.by_state
