"""Daphne with timers on governance's entry points (issue 34 "Speed"): how much CPU each takes in a
serving process, by tenant, cold caches and all. Not a test and not for production.

    python bench/gov_probe.py <daphne arguments> mcpsite.asgi:application

Every GOV_PROBE_EVERY seconds (2) it writes {tenant: {what: [calls, thread-CPU ns]}} as JSON to
GOV_PROBE_OUT. Each timer reads the thread's CPU clock (time.thread_time_ns) around a synchronous
call, or around an awaited one that did not yield (one that yielded is counted apart: its time holds
other requests' work). Used by bench/governance_parts.py --probe.
"""

# ruff: noqa: PLC0415 - imported once Django is set up
from __future__ import annotations

import collections
import functools
import inspect
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mcpsite.asgi  # noqa: E402,F401 - Django set up before the modules are patched

TOTALS: dict[str, dict[str, list[int]]] = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))


def _tenant(args: tuple[Any, ...]) -> str:
    ctx = args[0] if args else None
    tenant = getattr(ctx, "tenant", None)
    return getattr(tenant, "slug", "?")


def _timed(module: Any, name: str, label: str) -> None:
    inner = getattr(module, name)
    if inspect.iscoroutinefunction(inner):
        setattr(module, name, _simple_async(inner, label))
    else:

        @functools.wraps(inner)
        def wrapper_sync(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                entry = TOTALS[_tenant(args)][label]
                entry[0] += 1
                entry[1] += time.thread_time_ns() - started

        setattr(module, name, wrapper_sync)


def _simple_async(inner: Any, label: str) -> Any:
    @functools.wraps(inner)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        switches = _SWITCHES[0]
        try:
            return await inner(*args, **kwargs)
        finally:
            spent = time.thread_time_ns() - started
            key = label if _SWITCHES[0] == switches else label + " (other tasks ran)"
            entry = TOTALS[_tenant(args)][key]
            entry[0] += 1
            entry[1] += spent

    return wrapper


# Counts the event loop's task steps, so an awaited call that let other tasks run is told apart.
_SWITCHES = [0]


def _count_steps() -> None:
    import asyncio.events

    original = asyncio.events.Handle._run

    def _run(self: Any) -> Any:
        _SWITCHES[0] += 1
        return original(self)

    asyncio.events.Handle._run = _run  # type: ignore[method-assign]


def _dump() -> None:
    out = os.environ.get("GOV_PROBE_OUT", "/tmp/gov_probe.json")
    every = float(os.environ.get("GOV_PROBE_EVERY", "2"))
    while True:
        time.sleep(every)
        snapshot = {t: {k: list(v) for k, v in d.items()} for t, d in list(TOTALS.items())}
        snapshot["_process"] = {"cpu_ns": [1, time.process_time_ns()]}
        Path(out + ".tmp").write_text(json.dumps(snapshot))
        os.replace(out + ".tmp", out)


def main() -> None:
    from mcp_app.governance import answers, decision, guardrails
    from mcp_app.protocol import quotas, tools
    from mcp_app.transport import runner

    _count_steps()
    _timed(decision, "hidden", "decision.hidden")
    _timed(decision, "check", "decision.check")
    _timed(guardrails, "scan", "guardrails.scan")
    _timed(answers, "guarded_asker", "answers.guarded_asker")
    _timed(quotas, "check", "quotas.check")
    _timed(tools, "handle_call", "tools.handle_call (all)")
    import dataclasses

    from mcp_app.protocol import dispatch

    dispatch.METHODS["tools/call"] = dataclasses.replace(dispatch.METHODS["tools/call"], handler=tools.handle_call)
    _timed(runner, "dispatch_counted", "runner.dispatch_counted (all)")
    if os.environ.get("GOV_PROBE_FINE"):  # the steps inside them (counted under "?": no request context)
        from mcp_app.governance import conditions, scanning

        for owner, name in ((conditions.Prepared, "borrow"), (conditions.Prepared, "give_back"),
                            (conditions.Condition, "holds_in"), (decision, "_listed"), (guardrails, "applying"),
                            (scanning, "size_of"), (guardrails, "_scanned"), (scanning.Guards, "may_find"),
                            (scanning, "shaped"), (quotas, "_scopes")):  # fmt: skip
            _timed(owner, name, f"{getattr(owner, '__name__', owner)}.{name}")
    threading.Thread(target=_dump, daemon=True, name="gov-probe").start()
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(sys.argv[1:])


if __name__ == "__main__":
    main()
