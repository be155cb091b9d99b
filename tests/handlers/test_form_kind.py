"""The `form` kind: a tool that asks the person to fill in fields, defined without code (handlers/form.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app import validation as v
from mcp_app.models import Tool
from tests.protocol.support import call_answered_on_the_stream, result_of
from tests.support import make_ctx

FIELDS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "colour": {
            "type": "string",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
        },
    },
    "required": ["name"],
}
CONFIG = {"message": "Tell us about {{ who }}", "fields": FIELDS, "text": "{{ name }} ({{ who }})"}


def refused(config: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        v.validate_handler("form", config)
    return " ".join(caught.value.messages)


def test_a_form_with_primitive_fields_is_accepted():
    v.validate_handler("form", CONFIG)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"fields": FIELDS}, "needs 'message'"),
        ({**CONFIG, "fields": {"type": "array"}}, "must be a JSON Schema object"),
        ({**CONFIG, "fields": {"type": "object", "properties": {}}}, "at least one property"),
        (
            {**CONFIG, "fields": {"type": "object", "properties": {"a": {"type": "object"}}}},
            "cannot be asked",
        ),
        ({**CONFIG, "fields": {"type": "object", "properties": {"a": {"type": "array"}}}}, "cannot be asked"),
        (
            {**CONFIG, "fields": {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}},
            "may not have pattern",
        ),
        (
            {
                **CONFIG,
                "fields": {"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}},
            },
            "format must be",
        ),
        ({**CONFIG, "fields": {**FIELDS, "required": ["nope"]}}, "'required' must list"),
        ({**CONFIG, "fields": {**FIELDS, "additionalProperties": False}}, "a form is flat"),
        ({**CONFIG, "text": "{% include 'x' %}"}, "not allowed"),
        ({**CONFIG, "then": "x"}, "Unknown form handler keys"),
    ],
)
def test_a_form_elicitation_cannot_carry_is_refused_with_the_reason(config, says):
    assert says in refused(config)


@pytest.mark.django_db
def test_a_form_cannot_run_on_a_background_worker(tenant_a):
    tool = Tool(tenant=tenant_a, name="f", handler="form", handler_config=CONFIG, execution="background")
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    assert "runs in the server process" in str(caught.value.message_dict["execution"])


@pytest.fixture
def form_tool(transactional_db, tenant_a):
    Tool.objects.create(
        tenant=tenant_a,
        name="survey",
        input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
        handler="form",
        handler_config=CONFIG,
    )
    return tenant_a


def modern(tenant):
    return make_ctx(tenant, version="2026-07-28", session=None, client_capabilities={"elicitation": {}})


async def round_trip(tenant, answer: dict[str, Any]) -> dict[str, Any]:
    ctx = modern(tenant)
    params = {"name": "survey", "arguments": {"who": "you"}}
    asked = await result_of(ctx, "tools/call", params)
    question = asked["inputRequests"]["q1"]["params"]
    assert question == {"mode": "form", "message": "Tell us about you", "requestedSchema": FIELDS}
    retry = {**params, "requestState": asked["requestState"], "inputResponses": {"q1": answer}}
    return await result_of(ctx, "tools/call", retry)


async def test_the_answers_come_back_as_structured_content_and_the_reply_text(form_tool):
    result = await round_trip(form_tool, {"action": "accept", "content": {"name": "Ada", "age": 36}})
    assert result["structuredContent"] == {"name": "Ada", "age": 36}
    assert result["content"] == [{"type": "text", "text": "Ada (you)"}]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_form_is_an_error_result_saying_nothing_was_given(form_tool, action):
    result = await round_trip(form_tool, {"action": action})
    assert result["isError"] is True
    assert "nothing was given" in result["content"][0]["text"]


async def test_answers_that_do_not_fit_the_form_are_an_error_result(form_tool):
    result = await round_trip(form_tool, {"action": "accept", "content": {"age": -1}})
    assert result["isError"] is True
    assert "do not fit" in result["content"][0]["text"]


async def test_a_legacy_session_is_asked_on_the_calls_stream(form_tool):
    question, result = await call_answered_on_the_stream(
        form_tool,
        "2025-11-25",
        {"name": "survey", "arguments": {"who": "me"}},
        {"action": "accept", "content": {"name": "Bo"}},
    )
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "Tell us about me"
    assert result["content"] == [{"type": "text", "text": "Bo (me)"}]
