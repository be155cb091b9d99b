"""An owner's heavy work takes turns (content/forked.py): one at a time per tenant, AT_ONCE in a server.

The forked process itself is exercised end to end by tests/e2e/test_owner_isolation.py; here the work it
would run is a thread that sleeps, so the count of works running at once can be watched."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mcp_app.content import forked
from tenants import wall


class Watch:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[tuple[int, ...], int] = {}
        self.most: dict[tuple[int, ...], int] = {}
        self.total = 0
        self.most_total = 0

    def run(self, fn: Any, args: tuple[Any, ...], scope: wall.Scope, timeout: float) -> tuple[Any, list]:
        with self.lock:
            self.now[scope.tenants] = self.now.get(scope.tenants, 0) + 1
            self.most[scope.tenants] = max(self.most.get(scope.tenants, 0), self.now[scope.tenants])
            self.total += 1
            self.most_total = max(self.most_total, self.total)
        time.sleep(0.05)
        with self.lock:
            self.now[scope.tenants] -= 1
            self.total -= 1
        return fn(*args), []


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Watch:
    watched = Watch()
    monkeypatch.setattr(forked, "runs_here", lambda: False)
    monkeypatch.setattr(forked, "_run_forked", watched.run)
    return watched


def works(tenant: int, count: int, answers: list[Any], timeout: float = 30.0) -> list[threading.Thread]:
    def one(n: int) -> None:
        with wall.scoped(wall.Scope.of([tenant])):
            try:
                answers.append(forked.run(lambda: (tenant, n), timeout=timeout))
            except forked.Lost as exc:
                answers.append(exc)

    return [threading.Thread(target=one, args=(n,)) for n in range(count)]


def test_one_work_at_a_time_per_tenant_and_at_most_at_once_in_the_server(watch: Watch) -> None:
    answers: list[Any] = []
    threads = [t for tenant in range(1, 6) for t in works(tenant, 4, answers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a for a in answers if isinstance(a, tuple)) == sorted(
        (tenant, n) for tenant in range(1, 6) for n in range(4)
    )
    assert set(watch.most.values()) == {1}  # never two of one tenant's at once
    assert watch.most_total == forked.AT_ONCE  # five tenants' works, three at a time


def test_a_work_that_never_gets_its_turn_is_lost_with_a_message_saying_why(watch: Watch) -> None:
    answers: list[Any] = []
    slow = works(1, 1, answers)[0]
    with wall.scoped(wall.Scope.of([1])):
        turn = forked._tenant_turn(wall.current())
    turn.acquire()  # another of tenant 1's works is running
    try:
        waiting = works(1, 1, answers, timeout=0.2)[0]
        waiting.start()
        waiting.join(5)
    finally:
        turn.release()
    slow.start()
    slow.join(5)
    lost, done = answers
    assert isinstance(lost, forked.Lost) and "ran all the time this work could wait" in str(lost)
    assert done == (1, 0)
