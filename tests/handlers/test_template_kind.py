"""The template kind: tools and resource templates rendered from Django templates."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from mcp_app.handlers import registry
from tests.handlers.support import make_template, make_tool


async def test_text_shorthand_renders_the_arguments(ctx):
    result = await registry.run_inline(
        ctx, make_tool("template", {"text": "Hello, {{ name }}!"}), {"name": "Ada"}
    )
    assert result == {"content": [{"type": "text", "text": "Hello, Ada!"}]}


@pytest.mark.parametrize("payload", ["{{ settings.SECRET_KEY }}", "{% load static %}", "{% debug %}"])
async def test_template_injection_in_arguments_is_returned_literally(ctx, settings, payload):
    tool = make_tool(
        "template", {"text": "Hello, {{ name }}!", "structured": {"name": "{{ name }}", "s": "<{{ name }}>"}}
    )
    result = await registry.run_inline(ctx, tool, {"name": payload})
    assert result["content"][0]["text"] == f"Hello, {payload}!"
    assert result["structuredContent"] == {"name": payload, "s": f"<{payload}>"}
    assert settings.SECRET_KEY not in str(result)


async def test_structured_config_becomes_structured_content_with_json_types_kept(ctx):
    tool = make_tool("template", {"structured": {"sum": "{{ a }}", "label": "a={{ a }}", "fixed": [1, None]}})
    result = await registry.run_inline(ctx, tool, {"a": 5})
    assert result["structuredContent"] == {"sum": 5, "label": "a=5", "fixed": [1, None]}
    assert result["content"] == [{"type": "text", "text": '{"sum": 5, "label": "a=5", "fixed": [1, null]}'}]


async def test_is_error_config_marks_every_result_as_error(ctx):
    result = await registry.run_inline(ctx, make_tool("template", {"text": "retired", "is_error": True}), {})
    assert result == {"content": [{"type": "text", "text": "retired"}], "isError": True}


async def test_error_when_argument_is_truthy_gives_an_error_result(ctx):
    tool = make_tool(
        "template", {"text": "{% if failed %}bad: {{ why }}{% else %}ok{% endif %}", "error_when": "failed"}
    )
    assert await registry.run_inline(ctx, tool, {"failed": True, "why": "x"}) == {
        "content": [{"type": "text", "text": "bad: x"}],
        "isError": True,
    }
    assert await registry.run_inline(ctx, tool, {"failed": False}) == {
        "content": [{"type": "text", "text": "ok"}]
    }


async def test_bad_template_at_run_time_becomes_an_error_result_naming_the_problem(ctx):
    result = await registry.run_inline(ctx, make_tool("template", {"text": "{% debug %}"}), {})
    assert result["isError"] is True
    assert "is not allowed" in result["content"][0]["text"]


async def test_resource_template_renders_text_with_uri_variables(ctx):
    tpl = make_template("template", {"text": '{"user_id": "{{ user_id }}", "name": "User {{ user_id }}"}'})
    contents = await registry.read_template(ctx, tpl, "demo://users/42/profile", {"user_id": "42"})
    assert contents == [
        {
            "uri": "demo://users/42/profile",
            "mimeType": "application/json",
            "text": '{"user_id": "42", "name": "User 42"}',
        }
    ]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "needs 'text', 'content' or 'structured'"),
        ({"text": "{% include 'x' %}"}, "is not allowed"),
        ({"text": "{% if %}"}, "Template syntax error"),
        ({"text": "a", "content": []}, "not both"),
        ({"content": [{"type": "video"}]}, "unknown type 'video'"),
        ({"content": [{"type": "image"}]}, "needs 'data' and 'mimeType'"),
        ({"text": "a", "bogus": 1}, "Unknown template handler keys: bogus"),
        ({"structured": ["x"]}, "must be a JSON object"),
        ({"text": "a", "error_when": 3}, "name of an argument"),
    ],
)
def test_validate_config_explains_what_is_wrong(config, message):
    with pytest.raises(ValidationError, match=message):
        registry.validate_config("template", config)


def test_validate_config_accepts_the_demo_show_logo_shape():
    registry.validate_config(
        "template",
        {
            "content": [
                {"type": "text", "text": "Our logo:"},
                {"type": "image", "resource": "demo://logo.png"},
                {"type": "resource_link", "uri": "demo://readme"},
                {"type": "resource", "uri": "demo://readme", "annotations": {"audience": ["assistant"]}},
            ]
        },
    )


def test_validate_template_config_requires_text():
    with pytest.raises(ValidationError, match="needs 'text'"):
        registry.validate_template_config("template", {})
    registry.validate_template_config("template", {"text": "{{ user_id }}"})
