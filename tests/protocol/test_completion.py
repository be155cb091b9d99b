"""completion/complete (checklist §5.6)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from mcp_app.models import ResourceTemplate
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

PROMPT_REF = {"type": "ref/prompt", "name": "code_review"}
TEMPLATE_REF = {"type": "ref/resource", "uri": "demo://users/{user_id}/profile"}


async def complete(ctx, ref, name, value, **extra):
    params = {"ref": ref, "argument": {"name": name, "value": value}, **extra}
    return (await result_of(ctx, "completion/complete", params))["completion"]


async def test_cp02_prompt_argument_values_are_filtered_by_prefix(demo_a):
    completion = await complete(make_ctx(demo_a), PROMPT_REF, "language", "ty")
    assert completion == {"values": ["typescript"], "total": 1, "hasMore": False}


async def test_cp02_prefix_matching_ignores_case_and_keeps_the_configured_order(demo_a):
    completion = await complete(make_ctx(demo_a), PROMPT_REF, "language", "")
    assert completion["values"] == ["python", "javascript", "typescript", "go", "rust"]
    assert (await complete(make_ctx(demo_a), PROMPT_REF, "language", "PY"))["values"] == ["python"]


async def test_cp02_an_argument_without_completions_gets_an_empty_list(demo_a):
    assert await complete(make_ctx(demo_a), PROMPT_REF, "code", "x") == {
        "values": [],
        "total": 0,
        "hasMore": False,
    }


async def test_cp01_template_variables_are_completed(demo_a):
    completion = await complete(make_ctx(demo_a), TEMPLATE_REF, "user_id", "1")
    assert completion == {"values": ["1", "100"], "total": 2, "hasMore": False}


async def test_cp02_at_most_100_values_are_returned_with_total_and_has_more(demo_a):
    await sync_to_async(ResourceTemplate.objects.create)(
        tenant=demo_a,
        uri_template="demo://many/{n}",
        name="many",
        handler="template",
        handler_config={"text": "{{ n }}"},
        completions={"n": [str(i) for i in range(250)]},
    )
    completion = await complete(make_ctx(demo_a), {"type": "ref/resource", "uri": "demo://many/{n}"}, "n", "")
    assert len(completion["values"]) == 100
    assert completion["total"] == 250
    assert completion["hasMore"] is True


async def test_cp01_context_arguments_pick_the_values_for_the_other_argument(demo_a):
    ctx = make_ctx(demo_a, "2025-06-18")
    python = await complete(ctx, PROMPT_REF, "style", "", context={"arguments": {"language": "python"}})
    go = await complete(ctx, PROMPT_REF, "style", "", context={"arguments": {"language": "go"}})
    other = await complete(ctx, PROMPT_REF, "style", "", context={"arguments": {"language": "cobol"}})
    none = await complete(ctx, PROMPT_REF, "style", "")
    assert python["values"] == ["black", "ruff"]
    assert go["values"] == ["gofmt"]
    assert other["values"] == none["values"] == ["prettier"]


async def test_cp01_context_is_not_part_of_revisions_before_2025_06_18(demo_a):
    ctx = make_ctx(demo_a, "2025-03-26")
    completion = await complete(ctx, PROMPT_REF, "style", "", context={"arguments": {"language": "python"}})
    assert completion["values"] == ["prettier"]


async def test_cp05_context_arguments_must_be_strings(demo_a):
    params = {
        "ref": PROMPT_REF,
        "argument": {"name": "style", "value": ""},
        "context": {"arguments": {"language": 3}},
    }
    error = await error_of(make_ctx(demo_a, "2025-06-18"), "completion/complete", params)
    assert error["code"] == INVALID_PARAMS


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ({"type": "ref/prompt", "name": "nope"}, "language"),
        ({"type": "ref/prompt", "name": "code_review"}, "nope"),
        ({"type": "ref/resource", "uri": "demo://nope/{x}"}, "x"),
        ({"type": "ref/resource", "uri": "demo://users/{user_id}/profile"}, "nope"),
        ({"type": "ref/tool", "name": "echo"}, "message"),
        ({"name": "code_review"}, "language"),
        ("code_review", "language"),
    ],
)
async def test_cp03_an_unknown_prompt_template_argument_or_reference_is_invalid_params(demo_a, ref, name):
    params = {"ref": ref, "argument": {"name": name, "value": ""}}
    error = await error_of(make_ctx(demo_a), "completion/complete", params)
    assert error["code"] == INVALID_PARAMS


@pytest.mark.parametrize(
    "argument", [None, {"name": "language"}, {"name": "language", "value": 3}, {"value": "p"}]
)
async def test_cp05_a_malformed_argument_is_invalid_params(demo_a, argument):
    error = await error_of(make_ctx(demo_a), "completion/complete", {"ref": PROMPT_REF, "argument": argument})
    assert error["code"] == INVALID_PARAMS


async def test_sf05_completion_is_served_to_2024_11_05_clients_too(demo_a):
    completion = await complete(make_ctx(demo_a, "2024-11-05"), PROMPT_REF, "language", "r")
    assert completion["values"] == ["rust"]
