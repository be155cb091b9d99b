"""A call whose arguments a guardrail blocked keeps none of them in its usage error (issue 34, AMB-354):
the dashboard's errors listed what the request sent, the very secret the guardrail had refused."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_app.core.types import Catalog, GuardrailDef
from mcp_app.governance import audit, guardrails
from mcp_app.transport import runner
from mcp_app.usage import recorder as usage
from mcp_app.usage.flush import arguments_text

AWS = "AKIA" + "QRSTUVWXYZ234567"
GUARD = GuardrailDef(name="no-keys", detector="secrets", pattern="", where="arguments", action="block")
CALLER = SimpleNamespace(tenant=SimpleNamespace(id=-7, audit_sampling=()), client_id=None, subject=None, user_id=7)


async def usage_error_of(monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any], version: int) -> Any:
    """The usage error a tools/call of `arguments` leaves, its arguments scanned as protocol/tools does."""
    monkeypatch.setattr(runner.usage_flush, "started", lambda: True)  # no flush thread in a unit test
    seen = guardrails.ArgumentsSeen()
    token = guardrails.ARGUMENTS_SEEN.set(seen)
    try:
        rows = Catalog(tenant_id=-7, version=version, guardrails=(GUARD,))
        outcome = await guardrails.scan(
            CALLER, "tools/call", rows, "greet", arguments, "arguments", "arguments"
        )
    finally:
        guardrails.ARGUMENTS_SEEN.reset(token)
    text = outcome.blocked.message() if outcome.blocked is not None else "failed for its own reasons"
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": text}], "isError": True},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "greet", "arguments": arguments},
    }
    audit.take()
    usage.recorder().take()
    runner.record_usage(CALLER, message, response, time.perf_counter(), seen)  # type: ignore[arg-type]
    _, errors = usage.recorder().take()
    [entry] = errors[-7]
    return entry


async def test_a_blocked_calls_usage_error_keeps_none_of_its_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = await usage_error_of(monkeypatch, {"name": f"my key {AWS}"}, 1)
    assert entry.message == "Blocked by guardrail 'no-keys': the arguments held an AWS Access Key."
    assert entry.params == {"name": "greet", "arguments": runner.WITHHELD}
    assert AWS[4:12] not in arguments_text(entry.params)


async def test_a_call_in_whose_arguments_nothing_was_found_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = await usage_error_of(monkeypatch, {"name": "Ada"}, 2)
    assert entry.params == {"name": "greet", "arguments": {"name": "Ada"}}
