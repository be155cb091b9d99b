"""Content specs → MCP content blocks, and the sandboxed template engine."""

from __future__ import annotations

import base64

import pytest

from mcp_app.content.blocks import render_blocks
from mcp_app.content.sandbox import render_text, render_value
from mcp_app.core.errors import ContentError
from mcp_app.models import Resource
from tests.handlers.support import PNG, WAV
from tests.support import make_ctx


async def test_text_block_renders_django_template_without_html_escaping(ctx):
    blocks = await render_blocks(
        ctx, [{"type": "text", "text": "Hi {{ name }} & <b>{{ n|add:1 }}</b>"}], {"name": "A&B", "n": 1}
    )
    assert blocks == [{"type": "text", "text": "Hi A&B & <b>2</b>"}]


@pytest.mark.parametrize(
    "payload",
    [
        "{{ settings.SECRET_KEY }}",
        "{% load static %}{% static 'x' %}",
        "{% debug %}",
        "{% include '/etc/passwd' %}",
    ],
)
async def test_template_syntax_in_arguments_stays_inert_text(ctx, payload):
    blocks = await render_blocks(ctx, [{"type": "text", "text": "You said: {{ said }}"}], {"said": payload})
    assert blocks[0]["text"] == f"You said: {payload}"


@pytest.mark.parametrize(
    "tag", ["include 'x.html'", "extends 'base.html'", "load static", "ssi '/etc/passwd'", "debug"]
)
def test_sandbox_refuses_tags_that_reach_outside_the_template(tag):
    with pytest.raises(ContentError, match="is not allowed"):
        render_text("{% " + tag + " %}", {})


def test_sandbox_context_has_no_settings_or_request():
    assert render_text("[{{ settings.SECRET_KEY }}][{{ request }}][{{ csrf_token }}]", {}) == "[][][]"


def test_template_syntax_error_is_a_clear_content_error():
    with pytest.raises(ContentError, match="Template syntax error"):
        render_text("{% if %}", {})


def test_padding_filters_cannot_allocate_huge_strings():
    with pytest.raises(ContentError, match="at most"):
        render_text("{{ x|ljust:'100000000' }}", {"x": "a"})


def test_rendered_text_over_the_cap_is_an_error(monkeypatch):
    monkeypatch.setattr("mcp_app.content.sandbox.MAX_RENDERED_CHARS", 10)
    with pytest.raises(ContentError, match="longer than 10"):
        render_text("{{ x }}", {"x": "a" * 11})


def test_render_value_keeps_json_types_for_bare_variables_and_renders_other_strings():
    value = {
        "n": "{{ n }}",
        "items": ["{{ items }}", "{{ n }} items"],
        "flag": True,
        "nested": {"s": "{{ s|upper }}"},
    }
    assert render_value(value, {"n": 3, "items": [1, 2], "s": "x"}) == {
        "n": 3,
        "items": [[1, 2], "3 items"],
        "flag": True,
        "nested": {"s": "X"},
    }


async def test_image_block_takes_data_and_mime_type_from_a_tenant_blob_resource(ctx, resources_a):
    spec = {
        "type": "image",
        "resource": "demo://logo.png",
        "annotations": {"audience": ["user"], "priority": 1},
    }
    [block] = await render_blocks(ctx, [spec], {})
    assert block == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "mimeType": "image/png",
        "annotations": {"audience": ["user"], "priority": 1},
    }


async def test_audio_block_from_resource_and_from_inline_base64(ctx, resources_a):
    inline = base64.b64encode(b"abc").decode()
    blocks = await render_blocks(
        ctx,
        [
            {"type": "audio", "resource": "demo://beep.wav"},
            {"type": "audio", "data": inline, "mimeType": "audio/mpeg"},
        ],
        {},
    )
    assert blocks == [
        {"type": "audio", "data": base64.b64encode(WAV).decode(), "mimeType": "audio/wav"},
        {"type": "audio", "data": inline, "mimeType": "audio/mpeg"},
    ]


async def test_inline_media_with_invalid_base64_is_refused(ctx):
    with pytest.raises(ContentError, match="not valid base64"):
        await render_blocks(ctx, [{"type": "image", "data": "@@@", "mimeType": "image/png"}], {})


async def test_resource_link_is_filled_from_the_tenant_resource(ctx, resources_a):
    [block] = await render_blocks(ctx, [{"type": "resource_link", "uri": "demo://readme"}], {})
    assert block == {
        "type": "resource_link",
        "uri": "demo://readme",
        "name": "readme",
        "title": "Read me",
        "description": "How to use the demo",
        "mimeType": "text/markdown",
        "size": len(b"# Demo\nHello."),
        "annotations": {"audience": ["user"], "priority": 0.5},
    }


async def test_resource_link_to_a_templated_uri_may_be_described_explicitly(ctx, resources_a):
    spec = {
        "type": "resource_link",
        "uri": "demo://users/{{ id }}/profile",
        "name": "profile",
        "mimeType": "application/json",
    }
    [block] = await render_blocks(ctx, [spec], {"id": 42})
    assert block == {
        "type": "resource_link",
        "uri": "demo://users/42/profile",
        "name": "profile",
        "mimeType": "application/json",
    }


async def test_embedded_resource_carries_text_or_blob_contents_and_annotations(ctx, resources_a):
    specs = [
        {"type": "resource", "uri": "demo://readme", "annotations": {"lastModified": "2025-01-01T00:00:00Z"}},
        {"type": "resource", "uri": "demo://logo.png"},
    ]
    text_block, blob_block = await render_blocks(ctx, specs, {})
    assert text_block == {
        "type": "resource",
        "resource": {"uri": "demo://readme", "mimeType": "text/markdown", "text": "# Demo\nHello."},
        "annotations": {"lastModified": "2025-01-01T00:00:00Z"},
    }
    assert blob_block["resource"] == {
        "uri": "demo://logo.png",
        "mimeType": "image/png",
        "blob": base64.b64encode(PNG).decode(),
    }


async def test_unknown_resource_is_a_readable_content_error(ctx, resources_a):
    with pytest.raises(ContentError, match="Unknown resource 'demo://nope'"):
        await render_blocks(ctx, [{"type": "resource", "uri": "demo://nope"}], {})


@pytest.fixture
def resource_b(transactional_db, tenant_b) -> Resource:
    return Resource.objects.create(tenant=tenant_b, uri="b://secret", name="secret", text="tenant b only")


async def test_another_tenants_resource_is_as_unknown_as_a_missing_one(resources_a, resource_b):
    with pytest.raises(ContentError, match="Unknown resource 'b://secret'"):
        await render_blocks(
            make_ctx(resources_a["readme"].tenant), [{"type": "resource", "uri": "b://secret"}], {}
        )


async def test_unknown_block_type_is_refused(ctx):
    with pytest.raises(ContentError, match="Unknown content type 'video'"):
        await render_blocks(ctx, [{"type": "video"}], {})
