"""A handler asks the client (ctx.elicit, ctx.sample, ctx.list_roots) in either era (protocol/asking.py).

2026-07-28: multi round-trip requests with a signed, bound, expiring requestState. Legacy: a
server-to-client request on the call's stream, answered by a later POST.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_app.core.context import ASK_TOGETHER, RequestContext
from mcp_app.core.errors import InputRequired, MissingCapability
from mcp_app.handlers.python import register
from mcp_app.models import Prompt, ResourceTemplate, Tool
from mcp_app.protocol import asking
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from tests.protocol.support import call, call_answered_on_the_stream, error_of, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
CAN_ELICIT = {"elicitation": {}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
RUNS: list[str] = []


@register("test_ask_name")
async def ask_name(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    RUNS.append("start")
    answer = await ctx.elicit("What is your name?", NAME_FORM)
    if answer.get("action") != "accept":
        return {"content": [{"type": "text", "text": "You did not say."}]}
    return {
        "content": [
            {"type": "text", "text": f"Hello, {answer['content']['name']}{arguments.get('end', '!')}"}
        ]
    }


@register("test_ask_twice")
async def ask_twice(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    first = await ctx.elicit("First name?", NAME_FORM)
    model = await ctx.sample([{"role": "user", "content": {"type": "text", "text": "Say hi"}}], 20)
    return {"content": [{"type": "text", "text": f"{first['content']['name']}: {model['content']['text']}"}]}


@register("test_ask_carrying")
async def ask_carrying(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    runs = ctx.carried.get("runs", 0) + 1
    ctx.carried["runs"] = runs  # read again by this call's next run (2026-07-28)
    answer = await ctx.elicit("What is your name?", NAME_FORM)
    return {"content": [{"type": "text", "text": f"{answer['content']['name']} after {runs} runs"}]}


@pytest.fixture
def askers(tenant_a):
    for name, callable_name in (
        ("ask", "test_ask_name"), ("ask_twice", "test_ask_twice"), ("ask_carrying", "test_ask_carrying"),
    ):  # fmt: skip
        Tool.objects.create(
            tenant=tenant_a, name=name, handler="python", handler_config={"callable": callable_name}
        )
    RUNS.clear()
    return tenant_a


def modern_ctx(tenant, capabilities: dict[str, Any] | None = None, **kwargs: Any) -> RequestContext:
    return make_ctx(
        tenant, version=MODERN, session=None, client_capabilities=capabilities or CAN_ELICIT, **kwargs
    )


ACCEPT = {"action": "accept", "content": {"name": "Ada"}}


async def test_a_modern_call_that_asks_returns_input_required_then_completes_on_the_retry(askers):
    ctx = modern_ctx(askers)
    first = await result_of(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "q1": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM},
        }
    }
    assert "ttlMs" not in first  # never cacheable
    retry = {
        "name": "ask",
        "arguments": {},
        "requestState": first["requestState"],
        "inputResponses": {"q1": ACCEPT},
    }
    done = await result_of(ctx, "tools/call", retry)
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Hello, Ada!"}]


async def test_several_questions_take_several_rounds_each_carrying_the_answers_so_far(askers):
    ctx = modern_ctx(askers, capabilities={"elicitation": {}, "sampling": {}})
    params: dict[str, Any] = {"name": "ask_twice", "arguments": {}}
    first = await result_of(ctx, "tools/call", params)
    assert list(first["inputRequests"]) == ["q1"]
    second = await result_of(
        ctx, "tools/call", {**params, "requestState": first["requestState"], "inputResponses": {"q1": ACCEPT}}
    )
    assert second["inputRequests"]["q2"]["method"] == "sampling/createMessage"
    model = {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m"}
    done = await result_of(
        ctx, "tools/call", {**params, "requestState": second["requestState"], "inputResponses": {"q2": model}}
    )
    assert done["content"][0]["text"] == "Ada: hi!"


async def test_what_a_handler_carries_reaches_its_next_round_in_the_signed_state(askers):
    ctx = modern_ctx(askers)
    params: dict[str, Any] = {"name": "ask_carrying", "arguments": {}}
    first = await result_of(ctx, "tools/call", params)
    retry = {**params, "requestState": first["requestState"], "inputResponses": {"q1": ACCEPT}}
    done = await result_of(ctx, "tools/call", retry)
    assert done["content"][0]["text"] == "Ada after 2 runs"


async def test_a_retry_without_the_answer_is_asked_again_rather_than_failed(askers):
    ctx = modern_ctx(askers)
    first = await result_of(ctx, "tools/call", {"name": "ask", "arguments": {}})
    again = await result_of(
        ctx, "tools/call", {"name": "ask", "arguments": {}, "requestState": first["requestState"]}
    )
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["q1"]


async def state_of(ctx: RequestContext, arguments: dict[str, Any] | None = None) -> str:
    return (await result_of(ctx, "tools/call", {"name": "ask", "arguments": arguments or {}}))["requestState"]


@pytest.mark.parametrize(
    "change",
    ["tampered", "other arguments", "other caller", "other tool"],
)
async def test_a_state_that_was_tampered_with_or_belongs_to_another_request_is_refused_and_nothing_runs(
    askers, change
):
    ctx = modern_ctx(askers)
    state = await state_of(ctx)
    params: dict[str, Any] = {
        "name": "ask",
        "arguments": {},
        "requestState": state,
        "inputResponses": {"q1": ACCEPT},
    }
    if change == "tampered":
        params["requestState"] = state[:-3] + ("AAA" if state[-3:] != "AAA" else "BBB")
    elif change == "other arguments":
        params["arguments"] = {"end": "?"}
    elif change == "other caller":
        ctx = modern_ctx(askers, user_id=99)
    else:
        params["name"] = "ask_twice"
    RUNS.clear()
    error = await error_of(ctx, "tools/call", params)
    assert error["code"] == INVALID_PARAMS and "requestState" in error["message"]
    assert RUNS == []


async def test_an_expired_state_is_refused(askers, settings):
    ctx = modern_ctx(askers)
    state = await state_of(ctx)
    settings.MCP_ASK_STATE_SECONDS = 0
    await asyncio.sleep(1.1)  # signing timestamps have one-second resolution
    error = await error_of(ctx, "tools/call", {"name": "ask", "arguments": {}, "requestState": state})
    assert error["code"] == INVALID_PARAMS and "expired" in error["message"]


async def test_a_client_that_did_not_declare_the_capability_gets_minus_32021_naming_it(askers):
    reply = await call(
        modern_ctx(askers, capabilities={"sampling": {}}), "tools/call", {"name": "ask", "arguments": {}}
    )
    assert reply["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert reply["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}


async def test_a_legacy_call_asks_on_its_stream_and_continues_with_the_answer(askers):
    sent: list[dict[str, Any]] = []
    answered = asyncio.Event()

    async def emit(message: dict[str, Any]) -> None:
        sent.append(message)
        answered.set()

    ctx = make_ctx(askers, version="2025-11-25", client_capabilities=CAN_ELICIT, emit=emit)
    running = asyncio.create_task(result_of(ctx, "tools/call", {"name": "ask", "arguments": {}}))
    await asyncio.wait_for(answered.wait(), 5)
    (question,) = sent
    assert question["method"] == "elicitation/create" and question["id"].startswith("ask-")
    await asking.deliver("sess-1", {"jsonrpc": "2.0", "id": question["id"], "result": ACCEPT})
    result = await asyncio.wait_for(running, 5)
    assert result["content"] == [{"type": "text", "text": "Hello, Ada!"}]


@pytest.mark.parametrize(
    ("version", "capabilities", "why"),
    [
        ("2025-11-25", {}, "did not declare 'elicitation' support, so it was not asked. Use a client that"),
        ("2025-03-26", CAN_ELICIT, "a client on protocol revision 2025-03-26 cannot give (it came with 2025-06-18)"),
    ],
)
async def test_a_legacy_client_that_cannot_answer_gets_an_is_error_result_saying_so(
    askers, version, capabilities, why
):
    ctx = make_ctx(askers, version=version, client_capabilities=capabilities)
    result = await result_of(ctx, "tools/call", {"name": "ask", "arguments": {}})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("This tool needs to ask the person a question in a form (elicitation)") and why in text


async def test_a_legacy_question_for_2025_06_18_has_no_mode_field(askers):
    question, result = await call_answered_on_the_stream(
        askers, "2025-06-18", {"name": "ask", "arguments": {}}, {"action": "decline"}
    )
    assert "mode" not in question["params"]
    assert result["content"][0]["text"] == "You did not say."


# --- prompts/get and resources/read ask too -------------------------------------------------------


@register("test_ask_for_profile")
async def ask_for_profile(ctx: RequestContext, arguments: dict[str, Any]) -> str:
    answer = await ctx.elicit(f"Show profile {arguments['user_id']}?", NAME_FORM)
    return f"Profile {arguments['user_id']} for {answer.get('content', {}).get('name', 'nobody')}"


@pytest.fixture
def asking_prompt_and_template(tenant_a):
    Prompt.objects.create(
        tenant=tenant_a,
        name="review",
        title="Review code",
        arguments=[
            {"name": "language", "required": True, "ask": True, "title": "Language"},
            {"name": "code", "required": True},
        ],
        messages=[
            {"role": "user", "content": {"type": "text", "text": "Review this {{ language }}: {{ code }}"}}
        ],
    )
    ResourceTemplate.objects.create(
        tenant=tenant_a,
        uri_template="users://{user_id}/profile",
        name="profile",
        handler="python",
        handler_config={"callable": "test_ask_for_profile"},
    )
    return tenant_a


REVIEW = {"name": "review", "arguments": {"code": "x = 1"}}
LANGUAGE = {"action": "accept", "content": {"language": "python"}}


async def test_an_ask_argument_a_client_left_out_is_asked_for_and_listed_as_not_required(
    asking_prompt_and_template,
):
    ctx = modern_ctx(asking_prompt_and_template)
    (listed,) = (await result_of(ctx, "prompts/list"))["prompts"]
    assert [(a["name"], a["required"]) for a in listed["arguments"]] == [("language", False), ("code", True)]
    first = await result_of(ctx, "prompts/get", REVIEW)
    question = first["inputRequests"]["q1"]["params"]
    assert question["message"] == "The prompt 'Review code' needs: language."
    assert question["requestedSchema"] == {
        "type": "object",
        "properties": {"language": {"type": "string", "title": "Language"}},
        "required": ["language"],
    }
    done = await result_of(
        ctx,
        "prompts/get",
        {**REVIEW, "requestState": first["requestState"], "inputResponses": {"q1": LANGUAGE}},
    )
    assert done["messages"][0]["content"]["text"] == "Review this python: x = 1"


async def test_a_legacy_prompts_get_asks_on_its_stream(asking_prompt_and_template):
    question, result = await call_answered_on_the_stream(
        asking_prompt_and_template, "2025-11-25", REVIEW, LANGUAGE, method="prompts/get"
    )
    assert question["method"] == "elicitation/create"
    assert result["messages"][0]["content"]["text"] == "Review this python: x = 1"


@pytest.mark.parametrize("version", [MODERN, "2025-11-25"])
async def test_a_client_that_cannot_be_asked_gets_the_usual_missing_argument_error(
    asking_prompt_and_template, version
):
    ctx = make_ctx(asking_prompt_and_template, version=version, session=None if version == MODERN else True)
    error = await error_of(ctx, "prompts/get", REVIEW)
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Missing required argument(s) for prompt 'review': language."
    given = await result_of(
        ctx, "prompts/get", {"name": "review", "arguments": {"code": "x", "language": "go"}}
    )
    assert given["messages"][0]["content"]["text"] == "Review this go: x"


async def test_a_resource_template_whose_handler_asks_reads_after_the_answer_in_either_era(
    asking_prompt_and_template,
):
    ctx = modern_ctx(asking_prompt_and_template)
    read = {"uri": "users://7/profile"}
    first = await result_of(ctx, "resources/read", read)
    assert first["resultType"] == "input_required" and "ttlMs" not in first
    assert first["inputRequests"]["q1"]["params"]["message"] == "Show profile 7?"
    # The state is bound to the URI it was asked for.
    other = {
        "uri": "users://8/profile",
        "requestState": first["requestState"],
        "inputResponses": {"q1": ACCEPT},
    }
    assert "another request" in (await error_of(ctx, "resources/read", other))["message"]
    done = await result_of(
        ctx,
        "resources/read",
        {**read, "requestState": first["requestState"], "inputResponses": {"q1": ACCEPT}},
    )
    assert done["contents"][0]["text"] == "Profile 7 for Ada" and "ttlMs" in done
    _, legacy = await call_answered_on_the_stream(
        asking_prompt_and_template, "2025-11-25", read, ACCEPT, method="resources/read"
    )
    assert legacy["contents"][0]["text"] == "Profile 7 for Ada"


# --- Questions asked together, named by their definition (AMB-122) ---------------------------------

QUESTION = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "?", "requestedSchema": NAME_FORM},
}


def together(*names: str) -> dict[str, Any]:
    return {"method": ASK_TOGETHER, "params": {"requests": dict.fromkeys(names, QUESTION)}}


async def test_a_round_names_each_question_once_and_never_with_the_servers_own_name(tenant_a):
    """A definition's names are the inputRequests keys; a reserved or repeated one gets #n, the same
    every round (the handler asks in the same order), so one answer never stands for another question."""
    ctx = make_ctx(tenant_a, version=MODERN, session=None, client_capabilities=CAN_ELICIT)
    ask = asking.Rounds().asker(ctx)
    with pytest.raises(InputRequired) as first:
        await ask(together("approval", "city"))
    assert list(first.value.requests) == ["approval#2", "city"]
    with pytest.raises(InputRequired) as second:
        await ask(together("city"))
    assert list(second.value.requests) == ["city#2"]
    with pytest.raises(InputRequired) as unnamed:
        await ask(QUESTION)
    assert list(unnamed.value.requests) == ["q1"]
    # The next round brings answers under those keys; the handler gets them under its own names.
    answers = {"approval#2": {"action": "decline"}, "city": ACCEPT, "city#2": {"action": "cancel"}}
    ask = asking.Rounds(answers=answers).asker(ctx)
    assert await ask(together("approval", "city")) == {
        "results": {"approval": {"action": "decline"}, "city": ACCEPT}
    }
    assert await ask(together("city")) == {"results": {"city": {"action": "cancel"}}}


async def test_a_group_needs_every_capability_it_asks(tenant_a):
    ctx = make_ctx(tenant_a, version=MODERN, session=None, client_capabilities=CAN_ELICIT)
    roots = {"method": "roots/list", "params": {}}
    group = {"method": ASK_TOGETHER, "params": {"requests": {"name": QUESTION, "where": roots}}}
    with pytest.raises(MissingCapability) as missing:
        await asking.Rounds().asker(ctx)(group)
    assert missing.value.capability == "roots"
