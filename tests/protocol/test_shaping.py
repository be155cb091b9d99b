"""Per-revision shaping of results (checklist §8, MV-01, AMB-14)."""

from __future__ import annotations

import pytest

from mcp_app.protocol import shaping
from tests.protocol.support import ICON, result_of
from tests.support import make_ctx

ALL_TOOL_KEYS = {
    "execution",
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "_meta",
}


async def tools_by_name(ctx) -> dict[str, dict]:
    return {t["name"]: t for t in (await result_of(ctx, "tools/list"))["tools"]}


async def test_mv01_a_2024_11_05_client_gets_tools_without_title_annotations_output_schema_icons_or_meta(
    demo_a,
):
    tools = await tools_by_name(make_ctx(demo_a, "2024-11-05"))
    for tool in tools.values():
        assert set(tool) <= {"name", "description", "inputSchema"}
    assert tools["greet"] == {
        "name": "greet",
        "description": "Greet someone.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    }


async def test_mv01_amb14_a_2025_03_26_client_gets_annotations_with_the_title_folded_in(demo_a):
    tools = await tools_by_name(make_ctx(demo_a, "2025-03-26"))
    assert tools["greet"]["annotations"] == {"readOnlyHint": True, "title": "Greeter"}
    assert tools["echo"]["annotations"] == {"title": "Echo"}
    assert all(set(t) <= {"name", "description", "inputSchema", "annotations"} for t in tools.values())


async def test_mv01_a_2025_06_18_client_gets_title_output_schema_and_meta_but_no_icons(demo_a):
    tools = await tools_by_name(make_ctx(demo_a, "2025-06-18"))
    assert tools["greet"]["title"] == "Greeter"
    assert tools["greet"]["annotations"] == {"readOnlyHint": True}
    assert "icons" not in tools["greet"]
    assert tools["echo"]["outputSchema"]["required"] == ["echo"]
    assert tools["echo"]["_meta"] == {"example.com/tier": "free"}


async def test_mv01_a_2025_11_25_client_gets_icons(demo_a):
    tools = await tools_by_name(make_ctx(demo_a, "2025-11-25"))
    assert tools["greet"]["icons"] == [ICON]
    assert set(tools["greet"]) | set(tools["echo"]) <= ALL_TOOL_KEYS


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
async def test_mv01_structured_content_reaches_only_2025_06_18_and_later(demo_a, version):
    result = await result_of(
        make_ctx(demo_a, version), "tools/call", {"name": "echo", "arguments": {"message": "m"}}
    )
    assert result == {"content": [{"type": "text", "text": "m"}]}


async def test_amb14_old_clients_get_resource_links_as_text_and_no_last_modified(demo_a):
    result = await result_of(make_ctx(demo_a, "2025-03-26"), "tools/call", {"name": "media"})
    text, audio, link = result["content"]
    assert text == {"type": "text", "text": "see", "annotations": {"audience": ["user"]}}
    assert audio["type"] == "audio"
    assert link == {"type": "text", "text": "Resource link: Read me <demo://readme>"}
    assert "structuredContent" not in result


async def test_amb14_a_2024_11_05_client_gets_audio_as_a_text_note(demo_a):
    result = await result_of(make_ctx(demo_a, "2024-11-05"), "tools/call", {"name": "media"})
    assert [b["type"] for b in result["content"]] == ["text", "text", "text"]
    assert "audio/wav audio content omitted" in result["content"][1]["text"]


async def test_mv01_a_2025_06_18_client_gets_resource_links_without_icons(demo_a):
    result = await result_of(make_ctx(demo_a, "2025-06-18"), "tools/call", {"name": "media"})
    link = result["content"][2]
    assert link == {"type": "resource_link", "uri": "demo://readme", "name": "readme", "title": "Read me"}
    assert result["content"][0]["annotations"]["lastModified"] == "2025-01-01T00:00:00Z"
    full = await result_of(make_ctx(demo_a, "2025-11-25"), "tools/call", {"name": "media"})
    assert full["content"][2]["icons"] == [ICON]


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("2024-11-05", {"uri", "name", "description", "mimeType", "size", "annotations"}),
        ("2025-03-26", {"uri", "name", "description", "mimeType", "size", "annotations"}),
        ("2025-06-18", {"uri", "name", "title", "description", "mimeType", "size", "annotations"}),
        ("2025-11-25", {"uri", "name", "title", "description", "mimeType", "size", "annotations", "icons"}),
    ],
)
async def test_mv01_resources_carry_the_fields_of_the_revision(demo_a, version, keys):
    resources = (await result_of(make_ctx(demo_a, version), "resources/list"))["resources"]
    readme = next(r for r in resources if r["uri"] == "demo://readme")
    assert set(readme) == keys
    expected = {"audience", "priority"} | ({"lastModified"} if version >= "2025-06-18" else set())
    assert set(readme["annotations"]) == expected


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
async def test_mv01_old_clients_get_prompts_and_arguments_without_titles_or_icons(demo_a, version):
    prompts = (await result_of(make_ctx(demo_a, version), "prompts/list"))["prompts"]
    review = next(p for p in prompts if p["name"] == "code_review")
    assert set(review) == {"name", "description", "arguments"}
    assert review["arguments"][0] == {"name": "code", "description": "The code", "required": True}


async def test_mv01_a_2025_11_25_client_gets_prompt_and_template_icons(demo_a):
    ctx = make_ctx(demo_a, "2025-11-25")
    prompts = (await result_of(ctx, "prompts/list"))["prompts"]
    templates = (await result_of(ctx, "resources/templates/list"))["resourceTemplates"]
    assert next(p for p in prompts if p["name"] == "code_review")["icons"] == [ICON]
    assert next(t for t in templates if t["name"] == "user-profile")["icons"] == [ICON]


async def test_amb14_prompt_messages_are_down_levelled_for_old_clients(demo_a):
    result = await result_of(make_ctx(demo_a, "2024-11-05"), "prompts/get", {"name": "describe_logo"})
    assert [m["content"]["type"] for m in result["messages"]] == ["image", "resource", "text"]


def test_mv01_resource_contents_lose_meta_before_2025_06_18():
    contents = {"uri": "a://b", "text": "", "_meta": {"k": 1}}
    assert shaping.resource_contents(contents, "2025-03-26") == {"uri": "a://b", "text": ""}
    assert shaping.resource_contents(contents, "2025-06-18") == contents


def test_shaping_keeps_empty_text_and_zero_size():
    assert shaping.content_block({"type": "text", "text": ""}, "2024-11-05") == {"type": "text", "text": ""}
    assert shaping.resource({"uri": "a://b", "name": "b", "size": 0}, "2025-06-18")["size"] == 0
