"""The client's answers to what a tool asks it, through the guardrails on arguments (AMB-354)."""

from __future__ import annotations

from typing import Any

from mcp_app.core.context import ASK_TOGETHER, Asker, RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import Catalog
from mcp_app.governance import guardrails


def guarded_asker(ctx: RequestContext, catalog: Catalog, target: str) -> Asker:
    """`ctx.ask` with the guardrails on arguments of `target` over the client's answers to what the
    tool asks it (an elicitation's content, alone or in a group): they come from the caller as its
    arguments do. A block fails the call naming the guardrail (a tool error); a redaction is what the
    tool receives. Every era's asker and a background run's questions pass here."""
    if not guardrails.applying(catalog, target, arguments=True):
        return ctx.ask
    inner = ctx.ask

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        answer = await inner(request)
        if request.get("method") == ASK_TOGETHER:
            asked = (request.get("params") or {}).get("requests") or {}
            results = answer.get("results")
            if not isinstance(results, dict):
                return answer
            guarded = {
                name: await _answer(ctx, catalog, target, asked.get(name), result)
                for name, result in results.items()
            }
            return {**answer, "results": guarded}
        return await _answer(ctx, catalog, target, request, answer)

    return ask


async def _answer(ctx: RequestContext, catalog: Catalog, target: str, request: Any, answer: Any) -> Any:
    if not isinstance(request, dict) or request.get("method") != "elicitation/create":
        return answer
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), dict):
        return answer
    outcome = await guardrails.scan(
        ctx, "elicitation/create", catalog, target, answer["content"], "answer", "arguments"
    )
    if outcome.blocked is not None:
        raise ToolError(outcome.blocked.message())
    return {**answer, "content": outcome.value}
