"""The demo tenants are tenant documents (mcp_app/demo/tenants): valid, self-describing, and what an export gives back."""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from mcp_app.demo.seed import DEMO_SLUG, PUBLIC_URL, SECURE_SLUG, document_path, fill, load, seed_tenant
from mcp_app.demo.views import STREAM_MAX_DELAY, STREAM_MAX_N
from mcp_app.portability.document import KINDS, export_tenant, loads, schema_problems
from tenants.models import Tenant
from tests.protocol.support import result_of
from tests.support import make_ctx

SLUGS = (DEMO_SLUG, SECURE_SLUG)


def by_key(document: dict[str, Any], kind_key: str, natural_key: str) -> dict[str, Any]:
    return {item[natural_key]: item for item in document.get(kind_key, [])}


@pytest.mark.parametrize("slug", SLUGS)
def test_each_demo_document_is_accepted_by_the_published_json_schema(slug):
    assert schema_problems(load(slug)) == []


@pytest.mark.parametrize("slug", SLUGS)
def test_the_public_url_is_filled_into_every_string_that_names_it(slug, settings):
    settings.MCP_PUBLIC_URL = "https://mcp.example.com"
    document = load(slug)
    assert PUBLIC_URL not in json.dumps(document)
    assert "${" not in json.dumps(document)  # no other placeholder a seed would leave unfilled


def test_only_http_tool_urls_hold_the_placeholder():
    raw = json.dumps(loads(document_path(DEMO_SLUG).read_bytes()))
    tools = loads(document_path(DEMO_SLUG).read_bytes())["tools"]
    urls = {t["name"]: t["handler_config"]["url"] for t in tools if t["handler"] == "http"}
    assert urls == {
        "fetch_json": f"{PUBLIC_URL}/demo/echo",
        "stream_count": f"{PUBLIC_URL}/demo/stream",
        "ask_everything": f"{PUBLIC_URL}/demo/ask-together",
        "greet_in_a_task": f"{PUBLIC_URL}/demo/ask-then-task",
        "fail_on_purpose": f"{PUBLIC_URL}/demo/fail",
    }
    assert raw.count(PUBLIC_URL) == len(urls)


def test_fill_replaces_the_placeholder_inside_nested_strings_only():
    value = {"a": [f"{PUBLIC_URL}/x", 1, None, {"b": PUBLIC_URL}], "c": True}
    assert fill(value, "https://h") == {"a": ["https://h/x", 1, None, {"b": "https://h"}], "c": True}


def test_the_instructions_and_the_readme_name_every_demo_tool_and_prompt():
    document = load(DEMO_SLUG)
    instructions = document["settings"]["instructions"]
    [readme] = [r["text"] for r in document["resources"] if r["uri"] == "demo://readme"]
    for tool in document["tools"]:
        assert f"{tool['name']} ({tool['title']})" in instructions
        assert f"`{tool['name']}`" in readme
    for prompt in document["prompts"]:
        assert prompt["name"] in instructions
        assert f"`{prompt['name']}`" in readme
    for resource in document["resources"]:
        assert f"`{resource['uri']}`" in readme
    for template in document["resource_templates"]:
        assert f"`{template['uri_template']}`" in readme


def test_the_secure_readme_names_every_tool_and_the_vault_scope():
    document = load(SECURE_SLUG)
    [readme] = [r["text"] for r in document["resources"] if r["uri"] == "secure://readme"]
    for tool in document["tools"]:
        assert f"`{tool['name']}`" in readme
        if tool.get("required_scope"):
            assert f"`{tool['required_scope']}`" in readme


def test_the_demo_logo_is_a_valid_16x16_png_and_the_greet_icon_shows_it():
    document = load(DEMO_SLUG)
    [blob] = [r["blob"] for r in document["resources"] if r["uri"] == "demo://logo.png"]
    png = base64.b64decode(blob)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pos, chunks = 8, {}
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF
        chunks[kind] = data
        pos += 12 + length
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", chunks[b"IHDR"][:8]) == (16, 16)
    assert len(zlib.decompress(chunks[b"IDAT"])) == 16 * (1 + 16 * 3)
    [greet] = [t for t in document["tools"] if t["name"] == "greet"]
    assert greet["icons"][0]["src"] == f"data:image/png;base64,{blob}"


def test_stream_count_offers_no_more_than_its_endpoint_accepts():
    [tool] = [t for t in load(DEMO_SLUG)["tools"] if t["name"] == "stream_count"]
    properties = tool["input_schema"]["properties"]
    assert (properties["n"]["maximum"], properties["delay"]["maximum"]) == (STREAM_MAX_N, STREAM_MAX_DELAY)


@pytest.mark.django_db
def test_exporting_a_seeded_platform_gives_back_each_demo_document(settings):
    settings.MCP_PUBLIC_URL = "https://mcp.example.com"
    call_command("seed_demo", "--tenant-only", stdout=io.StringIO())
    for slug in SLUGS:
        exported = json.loads(
            json.dumps(export_tenant(Tenant.objects.get(slug=slug))).replace(
                settings.MCP_PUBLIC_URL, PUBLIC_URL
            )
        )
        document = loads(document_path(slug).read_bytes())
        assert list(exported) == list(document)
        assert {k: exported[k] for k in ("format", "version", "tenant", "settings")} == {
            k: document[k] for k in ("format", "version", "tenant", "settings")
        }
        for kind in KINDS:
            assert by_key(exported, kind.key, kind.natural_key) == by_key(
                document, kind.key, kind.natural_key
            )


@pytest.mark.django_db(transaction=True)  # seed_tenant runs in a thread, on its own connection
async def test_initialize_tells_clients_every_demo_tool_by_name_and_title():
    await sync_to_async(seed_tenant)(DEMO_SLUG, reset=False)
    tenant = await Tenant.objects.aget(slug=DEMO_SLUG)
    result = await result_of(
        make_ctx(tenant, session=None),
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    for tool in load(DEMO_SLUG)["tools"]:
        assert f"{tool['name']} ({tool['title']})" in result["instructions"]
