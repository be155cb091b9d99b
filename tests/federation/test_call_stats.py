"""Each upstream's health in this process: calls, failures by kind, last success, latency and the circuit."""

from __future__ import annotations

import time

import pytest

from mcp_app.federation import UpstreamError, UpstreamUnavailable, breaker, call_stats, call_tool, discover
from tests.federation.support import target_for


@pytest.fixture(autouse=True)
def _breaker(settings) -> None:
    settings.MCP_UPSTREAM_BREAKER_FAILURES = 2
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 60


async def test_results_count_as_successes_with_their_latency_and_an_error_result_is_one(upstream):
    target = target_for(upstream)
    before = time.time()
    await call_tool(target, "echo", {"message": "a"})
    await call_tool(target, "fail", {})  # an isError result: the upstream answered
    await discover(target)

    found = call_stats.of(target.upstream_key)
    assert found is not None
    assert (found.calls, found.failed, found.error_rate) == (3, 0, 0.0)
    assert found.last_success is not None and before <= found.last_success <= time.time()
    assert sum(found.histogram) == 3 and found.percentile(0.5) is not None
    assert found.circuit == breaker.CLOSED


async def test_a_killed_upstream_counts_unavailable_calls_and_its_circuit_opens(start_upstream, era):
    server = start_upstream(stateless=era == "2026-07-28", legacy_only=era == "legacy")
    target = target_for(server)
    await call_tool(target, "echo", {"message": "alive"})
    server.stop()

    for _ in range(3):  # two reach nothing, the third is refused by the open breaker
        with pytest.raises(UpstreamUnavailable):
            await call_tool(target, "echo", {"message": "dead"})

    found = call_stats.of(target.upstream_key)
    assert found is not None
    assert found.calls == 4 and found.failures == {"unavailable": 3, "error": 0, "timeout": 0, "busy": 0}
    assert found.error_rate == 0.75 and found.last_failure_kind == call_stats.UNAVAILABLE
    assert found.circuit == breaker.OPEN
    assert sum(found.histogram) == 1  # only the answered call has a latency
    assert [key for key in call_stats.snapshot()] == [target.upstream_key]


async def test_a_call_past_its_deadline_is_a_timeout_with_its_latency_and_does_not_open_the_circuit(upstream):
    target = target_for(upstream, timeout_seconds=0.5)
    for _ in range(2):
        with pytest.raises(UpstreamError) as caught:
            await call_tool(target, "hang", {})
        assert not isinstance(caught.value, UpstreamUnavailable)

    found = call_stats.of(target.upstream_key)
    assert found is not None
    assert (found.failures[call_stats.TIMEOUT], found.circuit, found.last_success) == (
        2,
        breaker.CLOSED,
        None,
    )
    assert found.percentile(0.5) >= 250  # each waited its 0.5 s deadline


async def test_an_upstream_answering_with_something_that_is_not_a_result_counts_an_error_and_stays_closed(
    start_upstream,
):
    server = start_upstream(stateless=True, status=418)
    target = target_for(server)
    for _ in range(3):
        with pytest.raises(UpstreamError) as caught:
            await call_tool(target, "echo", {"message": "x"})
        assert not isinstance(caught.value, UpstreamUnavailable)

    found = call_stats.of(target.upstream_key)
    assert found is not None
    assert (found.failures[call_stats.ERROR], found.failed, found.circuit) == (3, 3, breaker.CLOSED)
