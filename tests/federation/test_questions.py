"""An upstream's questions reach the caller of their call (federation/questions.py), in both upstream eras.

The upstream is the SDK's own server asking through its resolvers: a server-to-client request mid-call
on a legacy session, an InputRequiredResult on 2026-07-28. The caller's side is a plain `ask` that
answers as a person's client would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_app.federation import Asking, Round, UpstreamError, call_tool
from tests.federation.support import target_for, upstream_sees

ANSWERS: dict[str, dict[str, Any]] = {
    "elicitation/create": {"action": "accept", "content": {"name": "Ada"}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "short"},
        "model": "test-model",
    },
    "roots/list": {"roots": [{"uri": "file:///work/project", "name": "project"}]},
}


class Person:
    """The caller's client: answers every question by its method, and notes what it was asked."""

    def __init__(self, answers: dict[str, dict[str, Any]] | None = None, delay: float = 0.0) -> None:
        self.answers = answers or ANSWERS
        self.delay = delay
        self.asked: list[tuple[str, str]] = []  # (name, method)

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        await asyncio.sleep(self.delay)
        self.asked += [(name, request["method"]) for name, request in requests.items()]
        return {name: self.answers[request["method"]] for name, request in requests.items()}


class Later(Exception):
    """What a 2026-07-28 caller's ask raises on its first round: the answer comes with the next one."""


def tools_calls(server: Any) -> int:
    return server.stats()["methods"].get("tools/call", 0)


@pytest.mark.parametrize(
    ("tool", "arguments", "method", "text"),
    [
        ("ask_name", {}, "elicitation/create", "Hello, Ada!"),
        ("summarize", {"text": "a long text"}, "sampling/createMessage", "Summary: short"),
        ("list_roots", {}, "roots/list", "Roots: file:///work/project"),
    ],
)
async def test_each_question_is_answered_by_the_caller(upstream, era, tool, arguments, method, text):
    person = Person()

    result = await call_tool(target_for(upstream), tool, arguments, asking=Asking(ask=person.ask))

    assert result["content"][0]["text"] == text and not result.get("isError")
    assert [m for _name, m in person.asked] == [method]
    name = person.asked[0][0]
    assert name == "q1" if era == "legacy" else name.startswith("r1.")


async def test_a_declined_form_reaches_the_upstream_as_declined(upstream):
    person = Person({**ANSWERS, "elicitation/create": {"action": "decline"}})

    result = await call_tool(target_for(upstream), "ask_name", {}, asking=Asking(ask=person.ask))

    assert result["content"][0]["text"] == "No name given (decline)."


async def test_questions_of_two_rounds_are_named_apart(upstream, era):
    person = Person()

    result = await call_tool(target_for(upstream), "ask_then_sample", {}, asking=Asking(ask=person.ask))

    assert result["content"][0]["text"] == "Poem: short"
    names = [name for name, _method in person.asked]
    assert [m for _name, m in person.asked] == ["elicitation/create", "sampling/createMessage"]
    if era == "legacy":
        assert names == ["q1", "q2"]
    else:
        assert names[0].startswith("r1.") and names[1].startswith("r2.")


async def test_an_ask_that_raises_ends_the_call_and_cancels_a_legacy_upstreams_call(upstream, era):
    before = upstream.stats()["methods"].get("notifications/cancelled", 0)
    completed = upstream.stats()["completed"].count("ask_name")

    async def ask(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise Later(list(requests))

    with pytest.raises(Later):
        await call_tool(target_for(upstream), "ask_name", {}, asking=Asking(ask=ask))

    if era == "legacy":  # a 2026-07-28 upstream's round was over already: nothing to cancel
        async with asyncio.timeout(10):
            while upstream.stats()["methods"].get("notifications/cancelled", 0) == before:
                await asyncio.sleep(0.05)
    assert upstream.stats()["completed"].count("ask_name") == completed


async def test_a_remembered_round_resumes_without_running_the_upstream_from_its_start(modern_upstream):
    target = target_for(modern_upstream)
    remembered: list[Round] = []

    async def first(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise Later

    async def second(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if any(r["method"] == "sampling/createMessage" for r in requests.values()):
            raise Later
        return await Person().ask(requests)

    calls = tools_calls(modern_upstream)
    for ask in (first, second):  # each run ends at its round's question, as a 2026-07-28 caller's does
        resume = remembered[-1] if remembered else None
        with pytest.raises(Later):
            await call_tool(target, "ask_then_sample", {}, asking=Asking(ask, resume, remembered.append))
    assert [r.number for r in remembered] == [1, 2]
    person = Person()
    result = await call_tool(target, "ask_then_sample", {}, asking=Asking(person.ask, remembered[-1]))

    assert result["content"][0]["text"] == "Poem: short"
    assert [m for _name, m in person.asked] == ["sampling/createMessage"]  # round 2's question only
    assert tools_calls(modern_upstream) - calls == 3  # one exchange per round, none run again


async def test_a_round_the_upstream_no_longer_takes_starts_again_from_its_first(modern_upstream):
    remembered: list[Round] = []

    async def later(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise Later

    with pytest.raises(Later):
        await call_tool(
            target_for(modern_upstream), "ask_name", {}, asking=Asking(later, None, remembered.append)
        )
    stale = Round(1, "v1.not-its-state", remembered[0].requests)
    person = Person()

    result = await call_tool(target_for(modern_upstream), "ask_name", {}, asking=Asking(person.ask, stale))

    assert result["content"][0]["text"] == "Hello, Ada!"


async def test_an_upstream_that_never_stops_asking_is_abandoned_after_the_bound(modern_upstream):
    person = Person()

    with pytest.raises(UpstreamError, match="asked for input more than 10 times"):
        await call_tool(target_for(modern_upstream), "ask_forever", {}, asking=Asking(ask=person.ask))

    assert len(person.asked) == 10


async def test_a_call_that_cannot_ask_fails_clearly(upstream):
    # Legacy: the question is refused and the upstream's tool fails with it; 2026-07-28: we say so.
    with pytest.raises(UpstreamError, match="this call has no client to ask"):
        await call_tool(target_for(upstream), "ask_name", {})


async def test_a_legacy_upstreams_questions_reach_the_call_they_belong_to(legacy_upstream):
    # Same pool key, so one session: each question must find its own call's caller.
    target = target_for(legacy_upstream)
    people = {name: Person({**ANSWERS, "elicitation/create": {"action": "accept", "content": {"name": name}}})
              for name in ("Ada", "Bo", "Cy")}  # fmt: skip
    for person in people.values():
        person.delay = 0.2  # all three questions are out at once
    sessions = len(legacy_upstream.stats()["sessions"])

    results = await asyncio.gather(
        *(call_tool(target, "ask_name", {}, asking=Asking(ask=p.ask)) for p in people.values())
    )

    assert [r["content"][0]["text"] for r in results] == ["Hello, Ada!", "Hello, Bo!", "Hello, Cy!"]
    assert len(legacy_upstream.stats()["sessions"]) - sessions == 1


async def test_the_time_a_person_takes_does_not_count_against_the_upstreams_deadline(legacy_upstream):
    person = Person(delay=2.5)  # past the deadline, which still leaves the exchange itself ample time

    result = await call_tool(
        target_for(legacy_upstream, timeout_seconds=2.0), "ask_name", {}, asking=Asking(ask=person.ask)
    )

    assert result["content"][0]["text"] == "Hello, Ada!"


async def test_an_invalid_answer_ends_the_call_clearly(upstream):
    person = Person({**ANSWERS, "roots/list": {"roots": "not a list"}})

    with pytest.raises(UpstreamError, match="answer to roots/list is not a valid result"):
        await call_tool(target_for(upstream), "list_roots", {}, asking=Asking(ask=person.ask))
    await upstream_sees(upstream, "methods", "tools/call")
