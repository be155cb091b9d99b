"""Approval before risky tools (Tool.approval): ask the person to confirm, before anything runs.

The question is an elicitation with no fields: the tool's name and arguments in the message, and
the person accepts, declines or dismisses it. It travels as every question does (protocol/asking.py):
a request on a legacy session's stream, or a named round ("approval") of a 2026-07-28 call, kept
apart from the handler's own numbered questions so that the handler's rounds (inline or on a
worker) are unchanged by it.

"once" remembers an approval for the legacy session, or for the signed-in caller (OAuth user and
client) of a 2026-07-28 call; an anonymous sessionless caller cannot be recognised, so it is asked
every time. A client that cannot be asked gets an isError refusal, or the call runs unasked, as
`approval_without_elicitation` says. Every decision is recorded (an ApprovalDecision row), once: a
2026-07-28 approval is recorded in the round whose inputResponses brought it.
"""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError, error_result
from mcp_app.core.types import ToolDef
from mcp_app.core.versions import is_modern
from mcp_app.models import ApprovalDecision
from mcp_app.protocol import asking

KEY = "approval"
ELICIT = "elicitation/create"
Outcome = ApprovalDecision.Outcome
_ARGUMENTS_SHOWN = 2_000  # characters of the arguments' JSON shown in the question


def _remembered_for(ctx: RequestContext) -> str:
    if ctx.session is not None:
        return f"session:{ctx.session.id}"
    if ctx.subject:
        return f"subject:{ctx.subject}"
    if ctx.user_id is not None or ctx.client_id:
        return f"caller:{ctx.user_id or ''}:{ctx.client_id or ''}"
    return ""


@database_sync_to_async
def approved_before(tenant_id: int, tool_id: int, remembered_for: str) -> bool:
    return (
        ApprovalDecision.objects.for_tenant(tenant_id)
        .filter(tool_id=tool_id, remembered_for=remembered_for, outcome=ApprovalDecision.Outcome.APPROVED)
        .exists()
    )


@database_sync_to_async
def record(
    *,
    tenant_id: int,
    tool_id: int,
    tool_name: str,
    arguments: dict[str, Any],
    outcome: str,
    user_id: int | None,
    client_id: str | None,
    session_id: str | None,
    client_address: str | None,
    remembered_for: str = "",
) -> None:
    ApprovalDecision.objects.create(
        tenant_id=tenant_id,
        tool_id=tool_id,
        tool_name=tool_name,
        arguments=arguments,
        outcome=outcome,
        user_id=user_id,
        client_id=client_id or "",
        session_id=session_id or "",
        client_address=(client_address or "")[:100],
        remembered_for=remembered_for,
    )


def question(tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    shown = json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True)
    if len(shown) > _ARGUMENTS_SHOWN:
        shown = shown[:_ARGUMENTS_SHOWN] + "\n…"
    label = f"{tool.title} ({tool.name})" if tool.title else tool.name
    message = f"Allow the tool {label} to run with these arguments?\n\n{shown}"
    params = {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {}},
    }
    return {"method": ELICIT, "params": params}


async def check(
    ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any], rounds: asking.Rounds | None
) -> dict[str, Any] | None:
    """None when the call may run; otherwise the isError result that ends it unrun.

    Raises InputRequired (2026-07-28) while the person has not answered yet.
    """
    if tool.approval == "off":
        return None
    remembered_for = _remembered_for(ctx) if tool.approval == "once" else ""
    if remembered_for and await approved_before(ctx.tenant.id, tool.id, remembered_for):
        return None

    async def decided(outcome: str) -> None:
        await record(
            tenant_id=ctx.tenant.id,
            tool_id=tool.id,
            tool_name=tool.name,
            arguments=arguments,
            outcome=outcome,
            user_id=ctx.user_id,
            client_id=ctx.client_id,
            session_id=ctx.session.id if ctx.session else None,
            client_address=ctx.client_address,
            remembered_for=remembered_for if outcome == Outcome.APPROVED else "",
        )

    if not asking.can_ask(ctx, ELICIT):
        if tool.approval_without_elicitation == "run":
            await decided(Outcome.RAN_UNASKED)
            return None
        await decided(Outcome.REFUSED)
        return error_result(
            f"Tool {tool.name!r} runs only after the person approves it, and this client cannot ask "
            "(it did not declare elicitation support). Nothing was run."
        )
    request = question(tool, arguments)
    if is_modern(ctx.protocol_version):
        assert rounds is not None
        answer = rounds.ask_as(ctx, KEY, request)
        fresh = KEY in rounds.fresh
    else:
        try:
            answer = await asking.session_asker(ctx)(request)
        except ToolError as exc:  # no answer in time, or the client answered with an error
            await decided(Outcome.CANCELLED)
            return error_result(f"{exc.message} Tool {tool.name!r} was not run.")
        fresh = True
    action = answer.get("action")
    outcomes: dict[Any, Outcome] = {"accept": Outcome.APPROVED, "decline": Outcome.DECLINED}
    outcome = outcomes.get(action, Outcome.CANCELLED)
    if fresh:
        await decided(outcome)
    if outcome == Outcome.APPROVED:
        return None
    said = "declined" if outcome == Outcome.DECLINED else "did not approve"
    return error_result(f"The person {said} running {tool.name!r}; nothing was run.")
