"""An owner's heavy work run in a process of its own, so that it slows no other tenant (AMB-277).

A large import, a large publish, the self-check: thousands of ``full_clean`` and schema checks. In a
thread of the serving process that CPU, and the GIL it holds, slowed every other tenant's requests on the
event loop (issue 32: 5-19x their idle p99). ``run(fn, *args)`` calls ``fn(*args)`` in a process forked
from the render processes' forkserver (Django already set up, ``render_pool``), at a lower CPU priority,
in the caller's tenant-wall scope, and returns its value or raises its exception; the calling thread (a
view's own) only waits. Arguments, value and exception go through pickle.

When another process cannot see this database (SQLite in memory: the test process), or the caller is
inside a transaction whose rows it could not see, or this process's settings were overridden (a test),
``fn`` runs here, in the calling thread, as it did before. ``run_capturing`` also returns what ``fn`` published to tenants
(infra/notify), for a caller whose channel layer does not cross processes to announce again
(signals/definitions.run_apart).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from django.conf import UserSettingsHolder, settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteDatabase

from mcp_app.content import render_pool
from mcp_app.infra import notify
from tenants import wall

T = TypeVar("T")

# The process yields the CPU to the serving process (nice(2): 0 is the default, 19 the least).
NICENESS = 10
# At most this many such processes at once in a serving process (each a forked Django, ~100 MB), and one
# per tenant: an owner's fifty imports at once wait their turn (in their own request threads) instead of
# forking fifty processes, and cannot take every turn from another tenant's owner.
AT_ONCE = 3
_turns = threading.BoundedSemaphore(AT_ONCE)
_tenant_turns: dict[tuple[int, ...], threading.Lock] = {}
_tenant_turns_lock = threading.Lock()


class Lost(Exception):
    """The process ended, or outlived its deadline, before it answered."""


def shared_database() -> bool:
    """Whether another process sees this process's database (not an in-memory SQLite)."""
    database = connections[DEFAULT_DB_ALIAS]
    return not (isinstance(database, SQLiteDatabase) and database.is_in_memory_db())


def runs_here() -> bool:
    """Whether the work must run in this process: another would not see this one's database (SQLite in
    memory), its uncommitted rows (a caller inside a transaction), or settings changed here after the
    forkserver started (a test's override)."""
    overridden = isinstance(getattr(settings, "_wrapped", None), UserSettingsHolder)
    return not shared_database() or connection.in_atomic_block or overridden


Events = list[tuple[int, dict[str, Any]]]


def run(fn: Callable[..., T], *args: Any, timeout: float = 600.0) -> T:
    """``fn(*args)`` in a process of its own (see the module); Lost if it never answers."""
    return run_capturing(fn, *args, timeout=timeout)[0]


def run_capturing(fn: Callable[..., T], *args: Any, timeout: float = 600.0) -> tuple[T, Events]:
    """``run``, and the tenant events ``fn`` published there (none when it ran here: they went out)."""
    if runs_here():
        return fn(*args), []
    deadline = time.monotonic() + timeout
    scope = wall.current()
    with _turn(_tenant_turn(scope), deadline), _turn(_turns, deadline):
        return _run_forked(fn, args, scope, deadline - time.monotonic())


def _tenant_turn(scope: wall.Scope) -> threading.Lock:
    with _tenant_turns_lock:
        return _tenant_turns.setdefault(scope.tenants, threading.Lock())


@contextlib.contextmanager
def _turn(lock: threading.Lock | threading.BoundedSemaphore, deadline: float) -> Iterator[None]:
    if not lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
        raise Lost("Other work of this tenant or of this server ran all the time this work could wait.")
    try:
        yield
    finally:
        lock.release()


def _run_forked(
    fn: Callable[..., T], args: tuple[Any, ...], scope: wall.Scope, timeout: float
) -> tuple[T, Events]:
    mp = render_pool.forkserver_context()
    ours, theirs = mp.Pipe(duplex=False)
    # Not daemonic: what it runs may need a render process of its own.
    database = connection.settings_dict["NAME"]
    proc = mp.Process(target=_child, args=(theirs, scope, database, fn, args), name="mcp-owner-work")
    proc.start()
    theirs.close()
    try:
        if not ours.poll(timeout):
            proc.kill()
            raise Lost(f"The work did not finish within {timeout:g} s and was stopped.")
        try:
            outcome, value, events = ours.recv()
        except EOFError:
            raise Lost("The work's process ended before it answered; see the server's log.") from None
    finally:
        ours.close()
        proc.join(timeout=5)
        if proc.exitcode is None:
            proc.kill()
            proc.join(timeout=5)
    if outcome == "raised":
        raise value
    return value, events


def _child(
    conn: Connection, scope: wall.Scope, database: str, fn: Callable[..., Any], args: tuple[Any, ...]
) -> None:
    os.nice(NICENESS)
    # The forkserver set Django up from the environment; the caller may use another database of the same
    # server (the test process's test_* database): the work reads and writes the caller's.
    connection.close()
    connection.settings_dict["NAME"] = database
    try:
        with wall.scoped(scope), notify.captured() as events:
            try:
                answer: tuple[str, Any, Events] = ("returned", fn(*args), events)
            except Exception as exc:  # noqa: BLE001 - handed to the caller, who raises it
                answer = ("raised", exc, [])
        conn.send(answer)
    finally:
        conn.close()
