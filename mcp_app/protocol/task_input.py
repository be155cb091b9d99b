"""A task that asks: `input_required` until the client answers (both eras).

The tasks extension's human-in-the-loop: the task's handler (inline, or on a worker whose questions
the server relays) awaits `ctx.elicit`/`sample`/`list_roots` as in a plain call. Here a question
is kept on the task's row (`ToolRun.exchanges`, with its key: `q1`, `q2`, … or the name its
definition gives it, AMB-122), tasks/get shows the
task `input_required` with `inputRequests`, and tasks/update (on any process) writes the answer to
the row; the asking task polls its row every ANSWER_POLL_SECONDS until MCP_ASK_TIMEOUT_SECONDS.
A response to a question that is not outstanding is ignored, as the extension directs. Only what the
creating request declared may be asked (its client capabilities); otherwise the handler gets the
usual "cannot ask" error result.

2025-11-25 (basic/utilities/tasks "Input Required"): the question goes out as a plain call's does,
a request on the session's stream (the task's emit tags it with `related-task`), and the answer POST
reaches it on any process (protocol/asking.py); the task is `input_required` meanwhile, the
question kept on the row as above.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from mcp_app.background import runs
from mcp_app.core.context import AS_TASK, Asker, RequestContext
from mcp_app.core.errors import InputRequired, MissingCapability, ToolError
from mcp_app.models import ToolRun
from mcp_app.protocol import asking

ANSWER_POLL_SECONDS = 0.5

# Told the task's job id whenever it becomes input_required or goes back to working (tasks._announce).
Announce = Callable[[str], Awaitable[None]]


def pending(exchanges: Any) -> dict[str, dict[str, Any]]:
    """The questions a task waits on: key -> the request (the inputRequests of tasks/get)."""
    return {
        entry["key"]: entry["asked"]
        for entry in exchanges or []
        if isinstance(entry, dict) and entry.get("key") and "answer" not in entry and "error" not in entry
    }


def _pose(job_id: str, questions: dict[str, dict[str, Any]]) -> None:
    at = timezone.now().isoformat(timespec="seconds")
    entries = [{"key": key, "asked": request, "at": at} for key, request in questions.items()]
    runs.change_exchanges(job_id, lambda exchanges: [*exchanges, *entries])


def _answers_of(job_id: str, keys: set[str]) -> dict[str, dict[str, Any]]:
    exchanges = ToolRun.objects.filter(job_id=job_id).values_list("exchanges", flat=True).first() or []
    return {
        entry["key"]: entry["answer"]
        for entry in exchanges
        if isinstance(entry, dict) and entry.get("key") in keys and "answer" in entry
    }


def _give_up(job_id: str, keys: set[str], why: str) -> None:
    runs.change_exchanges(
        job_id,
        lambda exchanges: [
            {**e, "error": why} if e.get("key") in keys and "answer" not in e else e for e in exchanges
        ],
    )


def asker(ctx: RequestContext, job_id: str, announce: Announce) -> Asker:
    """The asker of a 2026-07-28 task's handler: questions wait on the row for tasks/update.

    A group (AMB-122) is posed at once, under its names, and waits until every one is answered; a
    name is used once over the task's life (ext-tasks: keys are unique per task).
    """
    numbers = itertools.count(1)
    names = asking.KeyNames()

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("method") == AS_TASK:
            return {}  # already a task
        group = asking.group_of(request)
        named: dict[str, tuple[Any, dict[str, Any]]] | None = (
            {names.claim(str(n)): (n, r) for n, r in group.items()} if group is not None else None
        )
        if named is None:
            named = {names.claim(f"q{next(numbers)}"): (None, request)}
        for _name, question in named.values():
            if not asking.can_ask(ctx, question["method"]):
                raise ToolError(
                    f"This needs to ask the client ({question['method']}), and the request that made "
                    "this task did not declare that capability."
                )
        await database_sync_to_async(_pose)(job_id, {key: q for key, (_n, q) in named.items()})
        await announce(job_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.MCP_ASK_TIMEOUT_SECONDS
        keys = set(named)
        while len(answers := await database_sync_to_async(_answers_of)(job_id, keys)) < len(keys):
            if loop.time() >= deadline:
                why = f"The client did not answer within {settings.MCP_ASK_TIMEOUT_SECONDS:g} seconds."
                await database_sync_to_async(_give_up)(job_id, keys, why)
                raise ToolError(why)
            await asyncio.sleep(ANSWER_POLL_SECONDS)
        await announce(job_id)
        if group is None:
            return answers[next(iter(keys))]
        return {"results": {name: answers[key] for key, (name, _q) in named.items()}}

    return ask


def answer(job_id: str, responses: dict[str, Any]) -> int:
    """Write tasks/update's answers to the questions still outstanding; returns how many were taken."""
    taken = 0

    def take(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        nonlocal taken
        waiting = pending(exchanges)
        answered = {key: r for key, r in responses.items() if key in waiting and isinstance(r, dict)}
        taken = len(answered)
        if not answered:
            return None
        return [{**e, "answer": answered[e["key"]]} if e.get("key") in answered else e for e in exchanges]

    runs.change_exchanges(job_id, take)
    return taken


def session_asker(ctx: RequestContext, job_id: str, announce: Announce) -> Asker:
    """The asker of a 2025-11-25 task's handler: on the session's stream, input_required meanwhile.
    A group is asked one question after another, as a plain legacy call's (AMB-122)."""
    numbers = itertools.count(1)
    names = asking.KeyNames()
    on_stream = asking.session_asker(ctx)

    async def ask_one(request: dict[str, Any], key: str) -> dict[str, Any]:
        if not asking.can_ask(ctx, request["method"]):
            return await on_stream(request)  # raises the "cannot ask" ToolError, with its reason
        await database_sync_to_async(_pose)(job_id, {key: request})
        await announce(job_id)
        try:
            result = await on_stream(request)
        except ToolError as exc:
            await database_sync_to_async(_give_up)(job_id, {key}, exc.message)
            raise
        await database_sync_to_async(answer)(job_id, {key: result})
        await announce(job_id)
        return result

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("method") == AS_TASK:
            return {}  # already a task
        group = asking.group_of(request)
        if group is None:
            return await ask_one(request, names.claim(f"q{next(numbers)}"))
        results: dict[str, dict[str, Any]] = {}
        for name, question in group.items():
            results[name] = await ask_one(question, names.claim(str(name)))
            if question.get("method") == "elicitation/create" and results[name].get("action") != "accept":
                break
        return {"results": results}

    return ask


def replaying(ctx: RequestContext, answered: asking.Rounds, then: Asker) -> Asker:
    """The asker of a task made after its handler's questions were asked in rounds (AMB-286).

    The task runs the handler from its start: each question it asked in the rounds is answered from
    them (named as the rounds named it), `as_task` returns at once, and a question the rounds never
    saw is asked by `then` (the task's own asker: input_required until tasks/update).
    """
    rounds = asking.Rounds(dict(answered.answers), call_id=answered.call_id, carried=answered.carried)
    own = rounds.asker(ctx)

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        try:
            return await own(request)
        except (InputRequired, MissingCapability):
            return await then(request)

    return ask
