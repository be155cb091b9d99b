"""The Try page's live call (AMB-71): events as they happen, a cancel that really cancels, same scoping."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient, Client
from django.urls import reverse

from mcp_app.admin import try_tool
from mcp_app.core import notifications
from mcp_app.handlers.python import register
from mcp_app.models import Tool
from mcp_app.streams import inflight

pytestmark = pytest.mark.django_db(transaction=True)

STOPPED: list[str] = []


@register("test_admin_wait_until_cancelled")
async def wait_until_cancelled(ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Report one step, then wait; note a cancellation when it comes."""
    await notifications.progress(ctx, 1, 2, "waiting")
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        STOPPED.append(ctx.session.id)
        raise
    return {"content": [{"type": "text", "text": "waited"}]}


@pytest.fixture
async def close_connections() -> Any:
    """The async tests' database work runs in asgiref's worker thread: close its connection after."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def echo_a(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
        handler="python",
        handler_config={"callable": "echo"},
    )


@pytest.fixture
def waiter_a(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a,
        name="waiter",
        handler="python",
        handler_config={"callable": "test_admin_wait_until_cancelled"},
    )


@pytest.fixture
def ask_name_a(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a,
        name="ask_name",
        handler="form",
        handler_config={
            "message": "What is your name?",
            "fields": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            "text": "Hello, {{ name }}!",
        },
    )


def urls(tool: Tool) -> tuple[str, str]:
    return (
        reverse("admin:mcp_app_tool_try_stream", args=[tool.pk]),
        reverse("admin:mcp_app_tool_try_cancel", args=[tool.pk]),
    )


def answer_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_try_answer", args=[tool.pk])


def events(response: Any) -> list[dict[str, Any]]:
    # Read to the end (the test client serves the async stream by reading it whole; a browser reads
    # it as it comes, see tests/e2e/test_browser_try.py).
    with pytest.warns(Warning, match="must consume asynchronous iterators"):
        body = b"".join(response)
    return [json.loads(line) for line in body.decode().splitlines()]


def test_a_call_streams_its_start_then_its_result(client, alice, echo_a):
    client.force_login(alice)
    response = client.post(urls(echo_a)[0], {"arguments": '{"message": "hi"}'})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    got = events(response)
    assert [e["event"] for e in got] == ["started", "result"]
    assert json.loads(got[1]["body"])["structuredContent"] == {"echo": "hi"} and not got[1]["is_error"]


def test_progress_and_log_messages_come_as_events_before_the_result(client, alice, tenant_a):
    count = Tool.objects.create(
        tenant=tenant_a, name="count", handler="python", handler_config={"callable": "count_slowly"}
    )
    client.force_login(alice)
    got = events(client.post(urls(count)[0], {"arguments": '{"n": 2, "delay": 0}'}))
    methods = [e["message"]["method"] for e in got if e["event"] == "notification"]
    assert methods.count("notifications/progress") == 2 and "notifications/message" in methods
    assert got[-1]["event"] == "result" and got[0]["event"] == "started"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("{", "The arguments are not valid JSON"), ("[1]", "The arguments must be a JSON object")],
)
def test_arguments_that_are_not_an_object_are_one_problem_event(client, alice, echo_a, raw, problem):
    client.force_login(alice)
    (event,) = events(client.post(urls(echo_a)[0], {"arguments": raw}))
    assert event["event"] == "problem" and event["message"].startswith(problem)


def test_a_viewer_and_another_tenant_cannot_stream_or_cancel(client, bob, charlie, echo_a):
    stream, cancel = urls(echo_a)
    client.force_login(bob)
    assert client.post(stream, {"arguments": "{}"}).status_code == 403
    assert client.post(cancel, {"run": "a" * 16}).status_code == 403
    client.force_login(charlie)
    assert client.post(stream, {"arguments": "{}"}).status_code == 404
    assert client.post(cancel, {"run": "a" * 16}).status_code == 404


def test_the_stream_and_the_cancel_need_a_post_with_the_csrf_token(alice, echo_a):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    stream, cancel = urls(echo_a)
    assert strict.get(stream).status_code == 405
    assert strict.post(stream, {"arguments": "{}"}).status_code == 403
    assert strict.post(cancel, {"run": "a" * 16}).status_code == 403


def test_a_cancel_needs_the_run_id_the_stream_started_with(client, alice, echo_a):
    client.force_login(alice)
    assert client.post(urls(echo_a)[1], {"run": "../../x"}).status_code == 400
    assert client.post(urls(echo_a)[1], {"run": "unknown-but-well-formed"}).json() == {
        "cancelling": "unknown-but-well-formed"
    }


async def test_the_cancel_button_stops_the_running_call_like_notifications_cancelled(
    alice, waiter_a, close_connections
):
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream, cancel = await sync_to_async(urls)(waiter_a)
    response = await browser.post(stream, {"arguments": "{}"})
    lines = response.streaming_content.__aiter__()
    started = json.loads(await anext(lines))
    progress = json.loads(await anext(lines))
    assert started["event"] == "started" and progress["message"]["params"]["message"] == "waiting"
    session = try_tool.session_id(alice.pk, started["run"])
    assert inflight.running(session, try_tool.REQUEST_ID)
    # Another user's cancel names another session: it cannot reach this call.
    await try_tool.cancel(alice.pk + 1000, started["run"], "not yours")
    assert inflight.running(session, try_tool.REQUEST_ID)
    answered = await browser.post(cancel, {"run": started["run"]})
    assert answered.status_code == 200
    last = json.loads(await asyncio.wait_for(anext(lines), 5))
    assert last["event"] == "cancelled" and last["elapsed_ms"] < 5000
    assert session in STOPPED and not inflight.running(session, try_tool.REQUEST_ID)


async def test_leaving_the_page_mid_call_cancels_the_call(alice, waiter_a, close_connections):
    await sync_to_async(lambda: waiter_a.tenant)()  # loaded, as the page loads it
    events_of_call = try_tool.stream(waiter_a, alice.pk, {}, "leaving-the-page")
    assert (await anext(events_of_call))["event"] == "started"
    assert (await anext(events_of_call))["event"] == "notification"
    await events_of_call.aclose()  # what the server does when the browser drops the request
    await asyncio.sleep(0)
    assert try_tool.session_id(alice.pk, "leaving-the-page") in STOPPED


@pytest.mark.parametrize(("action", "text"), [("accept", "Hello, Ada!"), ("decline", "declined")])
async def test_a_question_of_the_tool_is_shown_and_the_persons_answer_goes_back_to_it(
    alice, ask_name_a, close_connections, action, text
):
    browser = AsyncClient()
    await browser.aforce_login(alice)
    stream = (await sync_to_async(urls)(ask_name_a))[0]
    lines = (await browser.post(stream, {"arguments": "{}"})).streaming_content.__aiter__()
    started = json.loads(await anext(lines))
    question = json.loads(await anext(lines))
    assert question["event"] == "question" and question["method"] == "elicitation/create"
    assert question["params"]["message"] == "What is your name?"
    assert question["params"]["requestedSchema"]["required"] == ["name"]
    answered = await browser.post(
        await sync_to_async(answer_url)(ask_name_a),
        {"run": started["run"], "question": question["id"], "action": action, "content": '{"name": "Ada"}'},
    )
    assert answered.status_code == 200
    result = json.loads(await asyncio.wait_for(anext(lines), 5))
    assert result["event"] == "result" and text in result["body"], result


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"run": "a" * 16, "question": "ask-" + "b" * 16, "action": "maybe"}, 400),
        ({"run": "a" * 16, "question": "ask-" + "b" * 16, "action": "accept", "content": "[1]"}, 400),
        ({"run": "a" * 16, "question": "not-a-question", "action": "accept"}, 400),
        ({"run": "a" * 16, "question": "ask-" + "b" * 16, "action": "decline"}, 200),
    ],
)
def test_an_answer_names_a_question_and_says_accept_decline_or_cancel(client, alice, echo_a, fields, status):
    client.force_login(alice)
    assert client.post(answer_url(echo_a), fields).status_code == status


def test_a_viewer_and_another_tenant_cannot_answer(client, bob, charlie, echo_a):
    fields = {"run": "a" * 16, "question": "ask-" + "b" * 16, "action": "accept", "content": "{}"}
    client.force_login(bob)
    assert client.post(answer_url(echo_a), fields).status_code == 403
    client.force_login(charlie)
    assert client.post(answer_url(echo_a), fields).status_code == 404
