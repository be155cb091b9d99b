"""Approval before risky tools (Tool.approval, protocol/approval.py): the person confirms, or nothing runs.

Both eras: a named MRTR round for 2026-07-28, a request on the session's stream for legacy sessions.
Every decision is recorded once, with who and what.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.core.context import RequestContext
from mcp_app.handlers.python import register
from mcp_app.models import ApprovalDecision, Tool
from tests.protocol.support import call_answered_on_the_stream, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
CAN_ELICIT = {"elicitation": {}}
RAN: list[dict[str, Any]] = []
ACCEPT = {"action": "accept", "content": {}}
DECLINE = {"action": "decline"}


@register("test_delete_note")
async def delete_note(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    RAN.append(arguments)
    return {"content": [{"type": "text", "text": f"Deleted {arguments['note']}."}]}


@register("test_delete_and_ask")
async def delete_and_ask(ctx: RequestContext, arguments: dict[str, Any]) -> dict[str, Any]:
    answer = await ctx.elicit("Why?", {"type": "object", "properties": {"why": {"type": "string"}}})
    RAN.append(arguments)
    return {
        "content": [{"type": "text", "text": f"Deleted {arguments['note']}: {answer['content']['why']}."}]
    }


async def risky(
    tenant: Any,
    approval: str = "every_time",
    without: str = "refuse",
    callable_name: str = "test_delete_note",
) -> Tool:
    RAN.clear()
    return await Tool.objects.acreate(
        tenant=tenant,
        name="delete_note",
        title="Delete a note",
        handler="python",
        handler_config={"callable": callable_name},
        approval=approval,
        approval_without_elicitation=without,
    )


def modern(tenant: Any, capabilities: dict[str, Any] | None = None, **kwargs: Any) -> RequestContext:
    return make_ctx(
        tenant,
        version=MODERN,
        session=None,
        client_capabilities=CAN_ELICIT if capabilities is None else capabilities,
        **kwargs,
    )


CALL = {"name": "delete_note", "arguments": {"note": "groceries"}}


async def retry(ctx: RequestContext, first: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    params = {**CALL, "requestState": first["requestState"], "inputResponses": answers}
    return await result_of(ctx, "tools/call", params)


async def decisions() -> list[tuple[str, str]]:
    return [(d.tool_name, d.outcome) async for d in ApprovalDecision.objects.order_by("pk")]


async def test_a_modern_call_of_a_tool_needing_approval_asks_first_and_runs_only_once_approved(
    tenant_a, django_user_model
):
    await risky(tenant_a)
    ctx = modern(tenant_a, client_id="client-1")
    first = await result_of(ctx, "tools/call", CALL)
    assert first["resultType"] == "input_required"
    ((key, question),) = first["inputRequests"].items()
    assert key == "approval" and question["method"] == "elicitation/create"
    assert "Delete a note (delete_note)" in question["params"]["message"]
    assert '"note": "groceries"' in question["params"]["message"]
    assert RAN == [] and await decisions() == []
    done = await retry(ctx, first, {"approval": ACCEPT})
    assert done["content"] == [{"type": "text", "text": "Deleted groceries."}]
    assert RAN == [{"note": "groceries"}]
    decision = await ApprovalDecision.objects.aget()
    assert (decision.outcome, decision.arguments, decision.client_id) == (
        "approved",
        {"note": "groceries"},
        "client-1",
    )


@pytest.mark.parametrize(
    ("answer", "outcome", "said"),
    [(DECLINE, "declined", "declined"), ({"action": "cancel"}, "cancelled", "did not approve")],
)
async def test_a_declined_or_dismissed_approval_returns_an_error_result_and_runs_nothing(
    tenant_a, answer, outcome, said
):
    await risky(tenant_a)
    ctx = modern(tenant_a)
    first = await result_of(ctx, "tools/call", CALL)
    refused = await retry(ctx, first, {"approval": answer})
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == f"The person {said} running 'delete_note'; nothing was run."
    assert RAN == []
    assert await decisions() == [("delete_note", outcome)]


async def test_the_approval_round_and_the_handlers_own_questions_each_come_once_and_are_recorded_once(
    tenant_a,
):
    await risky(tenant_a, callable_name="test_delete_and_ask")
    ctx = modern(tenant_a)
    first = await result_of(ctx, "tools/call", CALL)
    second = await retry(ctx, first, {"approval": ACCEPT})
    assert list(second["inputRequests"]) == ["q1"] and RAN == []
    done = await retry(ctx, second, {"q1": {"action": "accept", "content": {"why": "done"}}})
    assert done["content"][0]["text"] == "Deleted groceries: done."
    assert await decisions() == [("delete_note", "approved")]


async def test_a_legacy_session_is_asked_on_its_stream_and_a_decline_runs_nothing(tenant_a):
    await risky(tenant_a)
    question, result = await call_answered_on_the_stream(tenant_a, "2025-11-25", CALL, DECLINE)
    assert question["method"] == "elicitation/create"
    assert question["params"]["requestedSchema"] == {"type": "object", "properties": {}}
    assert result["isError"] is True and RAN == []
    question, result = await call_answered_on_the_stream(tenant_a, "2025-11-25", CALL, ACCEPT)
    assert result["content"][0]["text"] == "Deleted groceries."
    assert await decisions() == [("delete_note", "declined"), ("delete_note", "approved")]


async def test_ask_once_remembers_an_approval_for_the_session_but_not_for_another(tenant_a):
    await risky(tenant_a, approval="once")
    await call_answered_on_the_stream(tenant_a, "2025-11-25", CALL, ACCEPT)
    again = await result_of(make_ctx(tenant_a, client_capabilities=CAN_ELICIT), "tools/call", CALL)
    assert again["content"][0]["text"] == "Deleted groceries."
    other = make_ctx(tenant_a, version=MODERN, session=None, client_capabilities=CAN_ELICIT)
    assert (await result_of(other, "tools/call", CALL))["resultType"] == "input_required"
    assert len(RAN) == 2 and await decisions() == [("delete_note", "approved")]


async def test_ask_once_remembers_a_signed_in_modern_caller_and_asks_an_anonymous_one_every_time(
    tenant_a, django_user_model
):
    await risky(tenant_a, approval="once")
    ada = await django_user_model.objects.acreate(username="ada")
    ctx = modern(tenant_a, user_id=ada.pk, client_id="c1")
    first = await result_of(ctx, "tools/call", CALL)
    await retry(ctx, first, {"approval": ACCEPT})
    assert (await result_of(ctx, "tools/call", CALL))["content"][0]["text"] == "Deleted groceries."
    other_client = modern(tenant_a, user_id=ada.pk, client_id="c2")
    assert (await result_of(other_client, "tools/call", CALL))["resultType"] == "input_required"
    anonymous = modern(tenant_a)
    first = await result_of(anonymous, "tools/call", CALL)
    await retry(anonymous, first, {"approval": ACCEPT})
    assert (await result_of(anonymous, "tools/call", CALL))["resultType"] == "input_required"


@pytest.mark.parametrize("version", [MODERN, "2025-11-25", "2025-03-26"])
async def test_a_client_that_cannot_ask_is_refused_clearly_and_nothing_runs(tenant_a, version):
    await risky(tenant_a)
    ctx = make_ctx(
        tenant_a,
        version=version,
        session=None if version == MODERN else True,
        client_capabilities={} if version != "2025-03-26" else CAN_ELICIT,
    )
    result = await result_of(ctx, "tools/call", CALL)
    assert result["isError"] is True
    assert (
        "runs only after the person approves it, and this client cannot ask" in result["content"][0]["text"]
    )
    assert RAN == [] and await decisions() == [("delete_note", "refused")]


async def test_a_tool_set_to_run_without_elicitation_runs_for_a_client_that_cannot_ask_and_says_so_in_the_record(
    tenant_a,
):
    await risky(tenant_a, without="run")
    result = await result_of(modern(tenant_a, capabilities={}), "tools/call", CALL)
    assert result["content"][0]["text"] == "Deleted groceries."
    assert await decisions() == [("delete_note", "ran_unasked")]


async def test_a_tool_without_approval_runs_at_once_and_records_nothing(tenant_a):
    await risky(tenant_a, approval="off")
    result = await result_of(modern(tenant_a), "tools/call", CALL)
    assert result["content"][0]["text"] == "Deleted groceries."
    assert await decisions() == []
