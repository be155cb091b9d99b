"""The admin's "Try this tool": editors run a tool as a client would; viewers and other tenants cannot."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from mcp_app.core.schema_examples import example_arguments
from mcp_app.handlers.python import register
from mcp_app.models import Tool

pytestmark = pytest.mark.django_db(transaction=True)


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
        output_schema={"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]},
        handler="python",
        handler_config={"callable": "echo"},
    )


@pytest.fixture
def count_a(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a,
        name="count",
        input_schema={"type": "object", "properties": {"n": {"type": "integer", "default": 2}}},
        handler="python",
        handler_config={"callable": "count_slowly"},
    )


def try_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_try", args=[tool.pk])


def test_the_change_page_offers_try_to_an_owner_and_the_form_starts_from_the_schema(client, alice, echo_a):
    client.force_login(alice)
    change = client.get(reverse("admin:mcp_app_tool_change", args=[echo_a.pk])).content.decode()
    assert try_url(echo_a) in change
    page = client.get(try_url(echo_a))
    assert page.status_code == 200
    assert json.loads(page.context["arguments"]) == {"message": ""}


def test_an_owner_runs_a_tool_and_sees_the_result_a_client_would_get(client, alice, echo_a):
    client.force_login(alice)
    page = client.post(try_url(echo_a), {"arguments": '{"message": "hi there"}'})
    assert page.status_code == 200
    outcome = page.context["outcome"]
    result = json.loads(outcome.body)
    assert result["structuredContent"] == {"echo": "hi there"}
    assert not outcome.is_error and not outcome.protocol_error
    assert "hi there" in page.content.decode()


def test_progress_and_log_messages_are_shown_with_the_result(client, alice, count_a):
    client.force_login(alice)
    outcome = client.post(try_url(count_a), {"arguments": '{"n": 2, "delay": 0}'}).context["outcome"]
    methods = [n["method"] for n in outcome.notifications]
    assert methods.count("notifications/progress") == 2 and "notifications/message" in methods


def test_arguments_failing_the_schema_show_the_is_error_result(client, alice, echo_a):
    client.force_login(alice)
    outcome = client.post(try_url(echo_a), {"arguments": '{"message": 5}'}).context["outcome"]
    assert outcome.is_error and "Invalid arguments" in outcome.body


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")],
)
def test_bad_arguments_get_a_readable_message_and_nothing_runs(client, alice, echo_a, raw, problem):
    client.force_login(alice)
    page = client.post(try_url(echo_a), {"arguments": raw})
    assert page.status_code == 200 and problem in page.context["problem"]
    assert "outcome" not in page.context
    assert page.context["arguments"] == raw  # what was typed stays in the box


def test_a_disabled_tool_says_so(client, alice, echo_a):
    Tool.objects.filter(pk=echo_a.pk).update(enabled=False)
    client.force_login(alice)
    page = client.post(try_url(echo_a), {"arguments": '{"message": "x"}'})
    assert "disabled" in page.context["problem"]


def test_a_viewer_cannot_try_a_tool(client, bob, echo_a):
    client.force_login(bob)
    change = client.get(reverse("admin:mcp_app_tool_change", args=[echo_a.pk])).content.decode()
    assert try_url(echo_a) not in change
    assert client.get(try_url(echo_a)).status_code == 403
    assert client.post(try_url(echo_a), {"arguments": '{"message": "x"}'}).status_code == 403


def test_another_tenants_tool_is_a_404(client, charlie, echo_a):
    client.force_login(charlie)
    assert client.get(try_url(echo_a)).status_code == 404


def test_example_arguments_use_defaults_and_blank_required_values():
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "default": 3}, "tags": {"type": "array"}, "note": {}},
        "required": ["tags"],
    }
    assert example_arguments(schema) == {"n": 3, "tags": []}
    assert example_arguments({"type": "object"}) == {}


@register("test_admin_primes")
async def admin_primes(ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [], "structuredContent": [2, 3, 5]}


def test_a_tool_only_2026_clients_see_is_tried_as_one_of_them_would_call_it(client, alice, tenant_a):
    primes = Tool.objects.create(
        tenant=tenant_a,
        name="primes",
        output_schema={"type": "array", "items": {"type": "integer"}},
        handler="python",
        handler_config={"callable": "test_admin_primes"},
    )
    client.force_login(alice)
    outcome = client.post(try_url(primes), {"arguments": "{}"}).context["outcome"]
    result = json.loads(outcome.body)
    assert not outcome.protocol_error, outcome.body
    assert result["structuredContent"] == [2, 3, 5]
    assert result["resultType"] == "complete"  # the 2026-07-28 answer
