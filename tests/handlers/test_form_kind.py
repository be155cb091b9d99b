"""The `form` kind: a tool that asks the person to fill in fields, defined without code (handlers/form.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.handlers import registry
from mcp_app.models import Tool
from tests.handlers.support import make_tool
from tests.protocol.support import (
    call_answered_on_the_stream,
    call_answering_each_on_the_stream,
    result_of,
)
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
        registry.validate_config("form", config)
    return " ".join(caught.value.messages)


def test_a_form_with_primitive_fields_is_accepted():
    registry.validate_config("form", CONFIG)


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
        (
            {**CONFIG, "fields": {"type": "object", "properties": {"a": {"type": "array"}}}},
            "a list field is a multiple choice",
        ),
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
    # The question is named by its form (AMB-122): the tool, for a form of one question.
    question = asked["inputRequests"]["survey"]["params"]
    assert question == {"mode": "form", "message": "Tell us about you", "requestedSchema": FIELDS}
    retry = {**params, "requestState": asked["requestState"], "inputResponses": {"survey": answer}}
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


# --- Choices (AMB-120, AMB-121) ---------------------------------------------------------------------

COLOURS = ["red", "green", "blue"]
TITLED = [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}, {"const": "b", "title": "Blue"}]
# Every primitive schema of 2025-11-25's PrimitiveSchemaDefinition, with the defaults it allows.
SPEC_FIELDS = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "minLength": 3, "maxLength": 99, "default": "a@b.c"},
        "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        "ok": {"type": "boolean", "title": "OK?", "default": True},
        "plain": {"type": "string", "title": "Colour", "enum": COLOURS, "default": "green"},
        "titled": {"type": "string", "oneOf": TITLED, "default": "g"},
        "legacy": {"type": "string", "enum": COLOURS, "enumNames": ["Red", "Green", "Blue"]},
        "many": {
            "type": "array",
            "title": "Colours",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": COLOURS},
            "default": ["red"],
        },
        "many_titled": {"type": "array", "items": {"anyOf": TITLED}, "default": ["r", "b"]},
    },
    "required": ["plain"],
}
CHOICES = {"message": "Pick", "fields": SPEC_FIELDS, "text": "{{ plain }} {{ many|join:',' }}"}


def test_every_primitive_schema_of_the_spec_is_accepted_in_a_form():
    registry.validate_config("form", CHOICES)


def field(**spec: Any) -> dict[str, Any]:
    return {"message": "Pick", "fields": {"type": "object", "properties": {"f": spec}}}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (field(type="string", enum=[]), "'enum' must be a non-empty list of strings"),
        (field(type="string", enum=["a", 1]), "'enum' must be a non-empty list of strings"),
        (field(type="string", enum=["a", "a"]), "lists a value twice"),
        (field(type="string", enum=["a", "b"], enumNames=["A"]), "one name for each value"),
        (field(type="string", enumNames=["A"]), "labels the values of 'enum'"),
        (field(type="string", enum=["a"], oneOf=[{"const": "a", "title": "A"}]), "not both"),
        (field(type="string", oneOf=[{"const": "a"}]), "choices"),
        (field(type="string", enum=["a", "b"], default="c"), "'default' 'c' is not an answer"),
        (field(type="string", oneOf=TITLED, default="red"), "'default' 'red' is not an answer"),
        (field(type="integer", minimum=1, default=0), "'default' 0 is not an answer"),
        (field(type="boolean", default="yes"), "is not an answer"),
        (field(type="integer", minimum=5, maximum=1), "'minimum' is above 'maximum'"),
        (field(type="string", minLength=5, maxLength=1), "'minLength' is above 'maxLength'"),
        (field(type="array", items={"type": "integer", "enum": [1]}), "'items' must be"),
        (field(type="array", items={"type": "string"}), "'items' must be"),
        (field(type="array", items={"anyOf": [{"const": "a", "title": 1}]}), "choices"),
        (field(type="array", items={"type": "string", "enum": COLOURS}, minItems=2, maxItems=1), "above"),
        (field(type="array", items={"type": "string", "enum": ["a"]}, minItems=2), "more than there are"),
        (field(type="array", items={"type": "string", "enum": COLOURS}, minItems=-1), "0 or more"),
        (
            field(type="array", items={"type": "string", "enum": COLOURS}, default=["pink"]),
            "list of its choices",
        ),
        (
            field(type="array", items={"type": "string", "enum": COLOURS}, maxItems=1, default=COLOURS),
            "as many",
        ),
        (field(type="array", items={"type": "string", "enum": COLOURS}, uniqueItems=True), "may not have"),
        (field(type="string", title=3), "'title' must be a string"),
    ],
)
def test_a_choice_the_spec_cannot_express_is_refused_with_the_reason(config, says):
    assert says in refused(config)


@pytest.fixture
def choice_tool(transactional_db, tenant_a):
    Tool.objects.create(tenant=tenant_a, name="pick", handler="form", handler_config=CHOICES)
    return tenant_a


async def modern_answer(tenant, content: dict[str, Any]) -> dict[str, Any]:
    ctx = modern(tenant)
    asked = await result_of(ctx, "tools/call", {"name": "pick"})
    assert asked["inputRequests"]["pick"]["params"]["requestedSchema"] == SPEC_FIELDS  # sent as written
    retry = {
        "name": "pick",
        "requestState": asked["requestState"],
        "inputResponses": {"pick": {"action": "accept", "content": content}},
    }
    return await result_of(ctx, "tools/call", retry)


async def test_chosen_answers_come_back_and_an_answer_outside_the_choices_is_an_error_result(choice_tool):
    chosen = await modern_answer(choice_tool, {"plain": "blue", "titled": "r", "many": ["red", "blue"]})
    assert chosen["content"][0]["text"] == "blue red,blue"
    assert chosen["structuredContent"]["many"] == ["red", "blue"]
    for wrong in (
        {"plain": "pink"},  # not in enum
        {"plain": "red", "titled": "Red"},  # a title, not a const
        {"plain": "red", "many": ["red", "pink"]},  # an item outside the choices
        {"plain": "red", "many": []},  # fewer than minItems
        {"plain": "red", "many": COLOURS},  # more than maxItems
        {"plain": "red", "many_titled": ["x"]},
    ):
        result = await modern_answer(choice_tool, wrong)
        assert result["isError"] is True, wrong
        assert "do not fit" in result["content"][0]["text"]


async def test_a_2025_11_25_session_gets_the_choices_as_written(choice_tool):
    [question], result = await call_answering_each_on_the_stream(
        choice_tool, "2025-11-25", {"name": "pick"}, [{"action": "accept", "content": {"plain": "red"}}]
    )
    assert question["params"]["requestedSchema"] == SPEC_FIELDS
    assert result["content"][0]["text"] == "red "


@pytest.fixture
def single_choice_tool(transactional_db, tenant_a):
    properties = {
        k: SPEC_FIELDS["properties"][k] for k in ("email", "count", "ok", "plain", "titled", "legacy")
    }
    fields = {"type": "object", "properties": properties, "required": ["titled"]}
    config = {"message": "Pick", "fields": fields, "text": "{{ titled }}"}
    Tool.objects.create(tenant=tenant_a, name="pick_one", handler="form", handler_config=config)
    return tenant_a


async def test_a_2025_06_18_session_gets_titled_choices_as_enum_names_and_no_defaults_it_lacks(
    single_choice_tool,
):
    """AMB-121: 2025-06-18's EnumSchema is enum + enumNames; only BooleanSchema has a default there."""
    [question], result = await call_answering_each_on_the_stream(
        single_choice_tool,
        "2025-06-18",
        {"name": "pick_one"},
        [{"action": "accept", "content": {"titled": "b"}}],
    )
    sent = question["params"]["requestedSchema"]["properties"]
    assert "mode" not in question["params"]
    assert sent["titled"] == {
        "type": "string",
        "enum": ["r", "g", "b"],
        "enumNames": ["Red", "Green", "Blue"],
    }
    assert sent["legacy"] == SPEC_FIELDS["properties"]["legacy"]
    assert sent["ok"]["default"] is True
    assert all("default" not in sent[k] for k in ("email", "count", "plain", "titled"))
    assert result["content"][0]["text"] == "b"  # the answer is the const, checked against the form as written


async def test_a_2025_06_18_session_is_not_asked_a_multiple_choice_and_is_told_why(choice_tool):
    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        sent.append(message)

    ctx = make_ctx(choice_tool, version="2025-06-18", client_capabilities={"elicitation": {}}, emit=emit)
    result = await result_of(ctx, "tools/call", {"name": "pick"})
    assert result["isError"] is True
    assert "multiple choice ('many')" in result["content"][0]["text"]
    assert "2025-11-25" in result["content"][0]["text"]
    assert not [m for m in sent if m.get("method") == "elicitation/create"]


# --- Several questions (AMB-122, AMB-123) -------------------------------------------------------------

QUESTIONS = {
    "questions": [
        {
            "name": "who",
            "message": "Your name, {{ greeting }}?",
            "fields": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
        {
            "name": "where",
            "message": "Where?",
            "fields": {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Oslo", "Rome"]}},
            },
        },
        {
            "name": "when",
            "message": "When?",
            "fields": {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}},
        },
    ],
    "text": "{{ name }} in {{ city }} on {{ day }}",
}
ANSWERS = {
    "who": {"action": "accept", "content": {"name": "Ada"}},
    "where": {"action": "accept", "content": {"city": "Rome"}},
    "when": {"action": "accept", "content": {"day": "2026-07-28"}},
}


@pytest.fixture
def three_questions(transactional_db, tenant_a):
    Tool.objects.create(
        tenant=tenant_a,
        name="plan",
        input_schema={"type": "object", "properties": {"greeting": {"type": "string"}}},
        handler="form",
        handler_config=QUESTIONS,
    )
    return tenant_a


async def test_a_modern_client_is_asked_all_three_questions_in_one_round_under_their_names(three_questions):
    ctx = modern(three_questions)
    params = {"name": "plan", "arguments": {"greeting": "friend"}}
    asked = await result_of(ctx, "tools/call", params)
    assert list(asked["inputRequests"]) == ["who", "where", "when"]
    assert asked["inputRequests"]["who"]["params"]["message"] == "Your name, friend?"
    # Part of the answers: the rest is asked again, with what was answered kept in the state.
    partial = {**params, "requestState": asked["requestState"], "inputResponses": {"where": ANSWERS["where"]}}
    again = await result_of(ctx, "tools/call", partial)
    assert list(again["inputRequests"]) == ["who", "when"]
    rest = {k: ANSWERS[k] for k in ("who", "when")}
    done = await result_of(
        ctx, "tools/call", {**params, "requestState": again["requestState"], "inputResponses": rest}
    )
    assert done["content"][0]["text"] == "Ada in Rome on 2026-07-28"
    assert done["structuredContent"] == {"name": "Ada", "city": "Rome", "day": "2026-07-28"}


async def test_a_legacy_session_is_asked_the_questions_one_after_another(three_questions):
    questions, result = await call_answering_each_on_the_stream(
        three_questions,
        "2025-11-25",
        {"name": "plan", "arguments": {"greeting": "you"}},
        list(ANSWERS.values()),
    )
    assert [q["params"]["message"] for q in questions] == ["Your name, you?", "Where?", "When?"]
    assert result["content"][0]["text"] == "Ada in Rome on 2026-07-28"


async def test_a_legacy_decline_ends_the_questions_and_the_call(three_questions):
    questions, result = await call_answering_each_on_the_stream(
        three_questions, "2025-11-25", {"name": "plan"}, [ANSWERS["who"], {"action": "decline"}]
    )
    assert len(questions) == 2  # "when" was never put to the person
    assert result["isError"] is True and "declined" in result["content"][0]["text"]


async def test_an_answer_outside_one_questions_choices_is_an_error_result(three_questions):
    ctx = modern(three_questions)
    asked = await result_of(ctx, "tools/call", {"name": "plan"})
    wrong = {**ANSWERS, "where": {"action": "accept", "content": {"city": "Paris"}}}
    result = await result_of(
        ctx, "tools/call", {"name": "plan", "requestState": asked["requestState"], "inputResponses": wrong}
    )
    assert result["isError"] is True and "do not fit" in result["content"][0]["text"]


def questions(*items: dict[str, Any]) -> dict[str, Any]:
    return {"questions": list(items)}


ONE_FIELD = {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({**QUESTIONS, "message": "x"}, "not both"),
        ({**QUESTIONS, "sensitive": True}, "A sensitive form has one question"),
        (questions(), "1 to 10 questions"),
        (questions(*[{"name": f"q{i}", "message": "m", "fields": ONE_FIELD} for i in range(11)]), "1 to 10"),
        (questions({"name": "a b", "message": "m", "fields": ONE_FIELD}), "'name' must be"),
        (questions({"name": "approval", "message": "m", "fields": ONE_FIELD}), "is taken"),
        (
            questions(
                {"name": "x", "message": "m", "fields": ONE_FIELD},
                {
                    "name": "x",
                    "message": "m",
                    "fields": {"type": "object", "properties": {"b": {"type": "string"}}},
                },
            ),
            "is taken",
        ),
        (
            questions(
                {"name": "x", "message": "m", "fields": ONE_FIELD},
                {"name": "y", "message": "m", "fields": ONE_FIELD},
            ),
            "field 'a' is also asked by 'x'",
        ),
        (questions({"name": "x", "message": "m"}), '{"name", "message", "fields"}'),
        (
            questions({"name": "x", "message": "m", "fields": {"type": "object", "properties": {}}}),
            "'fields' of question 1 of 'questions' needs at least one property",
        ),
        (questions({"name": "x", "message": "{% load x %}", "fields": ONE_FIELD}), "not allowed"),
    ],
)
def test_questions_a_form_cannot_ask_together_are_refused_with_the_reason(config, says):
    assert says in refused(config)


async def test_a_form_run_where_no_client_can_be_asked_names_what_it_would_ask(tenant_a):
    result = await registry.run_inline(make_ctx(tenant_a), make_tool("form", QUESTIONS), {})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "This asks the client (elicitation/create), but it runs where no client can be asked."
    )
