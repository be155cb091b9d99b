"""The client the Try page plays (AMB-250): its era and capabilities, its answers, and a live call that
meets exactly what such a client meets (a 2026-07-28 call's rounds played and answered by the page)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient
from django.urls import reverse

from mcp_app.admin.try_client import AnswerError, Client, answer_body, client_from
from mcp_app.handlers.python import register
from mcp_app.models import Tool
from mcp_app.protocol.tasks import EXTENSION

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_capabilities_declared_are_the_ones_ticked_in_the_eras_shape():
    every = frozenset({"elicitation.form", "elicitation.url", "sampling", "roots", "tasks"})
    assert Client("2025-11-25", every).capabilities() == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {},
        "roots": {"listChanged": False},
        "tasks": {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}},
    }  # fmt: skip
    assert Client("2026-07-28", frozenset({"tasks", "roots"})).capabilities() == {
        "roots": {"listChanged": False},
        "extensions": {EXTENSION: {}},
    }
    assert Client("2025-06-18", frozenset({"tasks"})).capabilities() == {}  # no tasks before 2025-11-25
    assert Client("2025-11-25", frozenset()).capabilities() == {}


def test_the_page_offers_only_the_eras_and_capabilities_it_knows():
    assert client_from("2024-11-05", ["sampling"]) == Client("2024-11-05", frozenset({"sampling"}))
    with pytest.raises(AnswerError, match="Choose a protocol revision"):
        client_from("2099-01-01", [])
    with pytest.raises(AnswerError, match="Unknown client capability 'telepathy'"):
        client_from("2025-11-25", ["telepathy"])


def test_answers_become_the_responses_a_client_sends():
    assert answer_body("", "accept", '{"name": "Ada"}') == {"result": {"action": "accept", "content": {"name": "Ada"}}}
    assert answer_body("elicitation/create", "decline", "") == {"result": {"action": "decline"}}
    reply = answer_body("sampling/createMessage", "accept", '{"text": "Short.", "model": ""}')["result"]
    assert reply == {
        "role": "assistant",
        "content": {"type": "text", "text": "Short."},
        "model": "typed-in-the-admin",
        "stopReason": "endTurn",
    }
    declined = answer_body("sampling/createMessage", "decline", "")
    assert declined["error"]["code"] == -1 and "declined the sampling request" in declined["error"]["message"]
    roots = answer_body("roots/list", "accept", '{"roots": [{"uri": " file:///a ", "name": "A"}, {"uri": "file:///b", "name": ""}]}')
    assert roots == {"result": {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]}}


@pytest.mark.parametrize(
    ("method", "action", "content", "problem"),
    [
        ("sampling/createMessage", "accept", '{"text": "  "}', "Type the model's reply"),
        ("roots/list", "accept", '{"roots": [{"uri": "home/me"}]}', "Root 1: its URI must look like file:///"),
        ("roots/list", "accept", '{"roots": "file:///a"}', "The roots must be a list"),
        ("tools/call", "accept", "{}", "The page cannot answer 'tools/call'"),
        ("elicitation/create", "maybe", "{}", "must be one of accept, cancel, decline"),
        ("elicitation/create", "accept", "[1]", "must be a JSON object"),
    ],
)
def test_an_answer_that_cannot_be_sent_says_what_to_fix(method, action, content, problem):
    with pytest.raises(AnswerError, match=problem.replace("(", r"\(")):
        answer_body(method, action, content)


@register("test_admin_roots_and_reply")
async def roots_and_reply(ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask for roots, then the client's model: two questions, one after the other."""
    roots = (await ctx.list_roots())["roots"]
    reply = await ctx.sample([{"role": "user", "content": {"type": "text", "text": "Name them."}}], 50)
    return {"content": [{"type": "text", "text": f"{[r['uri'] for r in roots]}: {reply['content']['text']}"}]}


@pytest.fixture
def asker_a(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a, name="asker", handler="python", handler_config={"callable": "test_admin_roots_and_reply"}
    )


@pytest.fixture
async def close_connections() -> Any:
    yield
    await sync_to_async(connections.close_all)()


async def next_event(lines: Any) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(anext(lines), 10))


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_the_page_answers_each_question_of_a_live_call_in_either_era(alice, asker_a, close_connections, era):
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream = await sync_to_async(reverse)("admin:mcp_app_tool_try_stream", args=[asker_a.pk])
    answer = await sync_to_async(reverse)("admin:mcp_app_tool_try_answer", args=[asker_a.pk])
    posted = {"arguments": "{}", "era": era, "capability": ["sampling", "roots"]}
    lines = (await browser.post(stream, posted)).streaming_content.__aiter__()
    started = await next_event(lines)
    assert started["version"] == era and started["capabilities"] == {"sampling": {}, "roots": {"listChanged": False}}
    for method, content in (
        ("roots/list", {"roots": [{"uri": "file:///srv/a"}]}),
        ("sampling/createMessage", {"text": "Just one."}),
    ):
        question = await next_event(lines)
        assert question["event"] == "question" and question["method"] == method, question
        fields = {"run": started["run"], "question": question["id"], "method": method, "action": "accept"}
        answered = await browser.post(answer, {**fields, "content": json.dumps(content)})
        assert answered.status_code == 200, answered.content
    done = await next_event(lines)
    assert done["event"] == "result" and done["view"]["blocks"] == [{"kind": "text", "text": "['file:///srv/a']: Just one."}]


async def test_a_capability_not_ticked_is_refused_as_such_a_client_is(alice, asker_a, close_connections):
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream = await sync_to_async(reverse)("admin:mcp_app_tool_try_stream", args=[asker_a.pk])
    lines = (await browser.post(stream, {"arguments": "{}", "era": "2026-07-28"})).streaming_content.__aiter__()
    assert (await next_event(lines))["capabilities"] == {}
    done = await next_event(lines)
    assert done["event"] == "result" and done["protocol_error"], done
    error = json.loads(done["body"])
    assert error["code"] == -32021 and error["message"].startswith(
        "This needs the list of folders or places the client shares (roots)"
    )


async def test_a_bad_era_and_a_tool_the_era_cannot_see_are_problems_not_calls(alice, tenant_a, close_connections):
    primes = await Tool.objects.acreate(
        tenant=tenant_a, name="primes", output_schema={"type": "array"}, handler="template", handler_config={"text": "x"}
    )
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream = await sync_to_async(reverse)("admin:mcp_app_tool_try_stream", args=[primes.pk])
    for era, problem in (
        ("1999-01-01", "Choose a protocol revision among 2026-07-28, 2025-11-25"),
        ("2025-11-25", "A client on 2025-11-25 does not see this tool"),
    ):
        lines = (await browser.post(stream, {"arguments": "{}", "era": era})).streaming_content.__aiter__()
        event = await next_event(lines)
        assert event["event"] == "problem" and event["message"].startswith(problem), event


@register("test_admin_ask_in_a_task")
async def ask_in_a_task(ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    roots = (await ctx.list_roots())["roots"]
    return {"content": [{"type": "text", "text": f"task saw {roots[0]['uri']}"}]}


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_with_tasks_ticked_the_page_follows_the_task_and_answers_its_question(
    alice, tenant_a, close_connections, era
):
    tool = await Tool.objects.acreate(
        tenant=tenant_a, name="tasked", handler="python", task_support="required",
        handler_config={"callable": "test_admin_ask_in_a_task"},
    )  # fmt: skip
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream = await sync_to_async(reverse)("admin:mcp_app_tool_try_stream", args=[tool.pk])
    answer = await sync_to_async(reverse)("admin:mcp_app_tool_try_answer", args=[tool.pk])
    posted = {"arguments": "{}", "era": era, "capability": ["tasks", "roots"]}
    lines = (await browser.post(stream, posted)).streaming_content.__aiter__()
    started = await next_event(lines)
    event = await next_event(lines)
    assert event["message"]["method"] == "notifications/tasks/status", event  # the handle, shown
    while event["event"] == "notification":  # the task's status changes
        event = await next_event(lines)
    assert event["event"] == "question" and event["method"] == "roots/list", event
    fields = {"run": started["run"], "question": event["id"], "method": "roots/list", "action": "accept"}
    answered = await browser.post(answer, {**fields, "content": '{"roots": [{"uri": "file:///t"}]}'})
    assert answered.status_code == 200
    while (event := await next_event(lines))["event"] == "notification":
        pass
    assert event["event"] == "result" and event["view"]["blocks"][0]["text"] == "task saw file:///t", event


def test_the_page_without_script_speaks_the_era_chosen_and_declares_nothing(client, alice, asker_a):
    client.force_login(alice)
    url = reverse("admin:mcp_app_tool_try", args=[asker_a.pk])
    legacy = client.post(url, {"arguments": "{}", "era": "2025-06-18"}).context
    assert legacy["outcome"].is_error and legacy["version"] == "2025-06-18"
    assert legacy["outcome"].view["blocks"][0]["text"].startswith(
        "This tool needs the list of folders or places the client shares (roots), and this client did not"
    )
    modern = client.post(url, {"arguments": "{}", "era": "2026-07-28"}).context["outcome"]
    assert modern.protocol_error and json.loads(modern.body)["code"] == -32021
    assert "problem" in client.post(url, {"arguments": "{}", "era": "1.0"}).context
