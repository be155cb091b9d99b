"""Prompts: list and get (checklist §5.5)."""

from __future__ import annotations

import base64

import pytest
from asgiref.sync import sync_to_async

from mcp_app.models import Prompt
from mcp_app.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from tests.protocol.support import PNG, error_of, result_of
from tests.support import make_ctx


async def test_pr01_prompts_list_describes_prompts_and_arguments_without_completion_config(demo_a):
    result = await result_of(make_ctx(demo_a, "2025-06-18"), "prompts/list")
    prompts = {p["name"]: p for p in result["prompts"]}
    assert prompts["code_review"] == {
        "name": "code_review",
        "title": "Code review",
        "description": "Review some code.",
        "arguments": [
            {"name": "code", "title": "Code", "description": "The code", "required": True},
            {"name": "language", "required": False},
            {"name": "style", "required": False},
        ],
    }


async def test_pr02_get_renders_the_messages_with_the_arguments(demo_a):
    result = await result_of(
        make_ctx(demo_a),
        "prompts/get",
        {"name": "code_review", "arguments": {"code": "x = 1", "language": "python"}},
    )
    assert result == {
        "description": "Review some code.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Please review this python:\nx = 1"}}
        ],
    }


async def test_pr02_an_optional_argument_may_be_left_out(demo_a):
    result = await result_of(
        make_ctx(demo_a), "prompts/get", {"name": "code_review", "arguments": {"code": "y"}}
    )
    assert result["messages"][0]["content"]["text"] == "Please review this code:\ny"


async def test_pr02_messages_may_carry_images_and_embedded_resources(demo_a):
    result = await result_of(make_ctx(demo_a), "prompts/get", {"name": "describe_logo"})
    image, embedded, link = (m["content"] for m in result["messages"])
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "user"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == PNG
    assert embedded == {
        "type": "resource",
        "resource": {"uri": "demo://readme", "mimeType": "text/markdown", "text": "# Demo\nHello."},
    }
    assert link["type"] == "resource_link" and link["uri"] == "demo://readme"


async def test_pr04_an_unknown_prompt_is_invalid_params(demo_a):
    error = await error_of(make_ctx(demo_a), "prompts/get", {"name": "nope"})
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Unknown prompt: nope"


async def test_pr04_a_missing_required_argument_is_invalid_params(demo_a):
    error = await error_of(
        make_ctx(demo_a), "prompts/get", {"name": "code_review", "arguments": {"language": "go"}}
    )
    assert error["code"] == INVALID_PARAMS
    assert "code" in error["message"]


@pytest.mark.parametrize("arguments", [{"code": 5}, {"code": ["x"]}, {"code": None}, ["code"], "code"])
async def test_pr05_arguments_must_be_an_object_of_strings(demo_a, arguments):
    error = await error_of(make_ctx(demo_a), "prompts/get", {"name": "code_review", "arguments": arguments})
    assert error["code"] == INVALID_PARAMS


async def test_pr05_undeclared_arguments_are_ignored_and_never_reach_the_template(demo_a):
    await sync_to_async(Prompt.objects.create)(
        tenant=demo_a,
        name="leak",
        messages=[{"role": "user", "content": {"type": "text", "text": "[{{ secret }}]"}}],
    )
    result = await result_of(make_ctx(demo_a), "prompts/get", {"name": "leak", "arguments": {"secret": "s"}})
    assert result["messages"][0]["content"]["text"] == "[]"


async def test_pr06_template_syntax_in_an_argument_stays_literal(demo_a):
    result = await result_of(
        make_ctx(demo_a),
        "prompts/get",
        {"name": "code_review", "arguments": {"code": "{{ settings.SECRET_KEY }}"}},
    )
    assert "{{ settings.SECRET_KEY }}" in result["messages"][0]["content"]["text"]


async def test_pr04_a_prompt_that_cannot_render_is_an_internal_error_with_a_safe_message(demo_a):
    await sync_to_async(Prompt.objects.create)(
        tenant=demo_a,
        name="dangling",
        messages=[{"role": "user", "content": {"type": "resource", "uri": "demo://gone"}}],
    )
    error = await error_of(make_ctx(demo_a), "prompts/get", {"name": "dangling"})
    assert error["code"] == INTERNAL_ERROR
    assert error["message"].startswith("Prompt 'dangling' could not be rendered")


def _prompt_embedding_the_resource_it_is_given(tenant) -> Prompt:
    prompt = Prompt(
        tenant=tenant,
        name="explain_resource",
        arguments=[{"name": "resourceUri", "required": True}],
        messages=[
            {"role": "user", "content": {"type": "resource", "uri": "{{ resourceUri }}"}},
            {"role": "user", "content": {"type": "resource_link", "uri": "{{ resourceUri }}"}},
        ],
    )
    prompt.full_clean()  # what the admin runs: a templated uri is accepted, as in tool content
    prompt.save()
    return prompt


async def test_pr02_an_embedded_resource_uri_may_be_a_template_over_the_arguments(demo_a):
    await sync_to_async(_prompt_embedding_the_resource_it_is_given)(demo_a)
    result = await result_of(
        make_ctx(demo_a),
        "prompts/get",
        {"name": "explain_resource", "arguments": {"resourceUri": "demo://readme"}},
    )
    embedded, link = (m["content"] for m in result["messages"])
    assert embedded["resource"]["uri"] == "demo://readme"
    assert embedded["resource"]["text"] == "# Demo\nHello."
    assert link["type"] == "resource_link" and link["uri"] == "demo://readme"
