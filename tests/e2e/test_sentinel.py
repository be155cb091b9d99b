"""Redis behind Sentinel, its primary killed under load (issue 35 §3).

A primary, a replica and three sentinels of the test's own (tests/fleet/sentinel.py); a Daphne and a
Celery worker whose only Redis setting is the Sentinel URL: sessions, stored events, the channel layer,
the cache, rate limits and the broker all go through it. The primary is SIGKILLed while SDK clients in
both eras call in a loop: the sentinels promote the replica, and every client is served again within
RESUME_SECONDS of the kill, on the session it had (its key reached the replica before the kill).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import pytest
import redis

from tests.e2e.helpers import Inbox, mcp_client, open_legacy_session, wait_until
from tests.e2e.servers import DaphneServer, ServerProcess, start_celery_worker, start_daphne
from tests.e2e.test_resume import events_of
from tests.fleet.sentinel import SentinelRedis

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="Sentinel and its Redis servers are the test's own (redis-server)"),
]

# docs/operations.md "Redis behind Sentinel": the sentinels call the primary down after 1 s of silence
# (DOWN_MILLISECONDS) and promote the replica; the pools ask them again on their next connection.
RESUME_SECONDS = 10.0
CLIENTS_PER_MODE = 2
AFTER_RECOVERY_CALLS = 5


class SessionInbox(Inbox):
    """Also the session ids the client's requests carried."""

    def __init__(self) -> None:
        super().__init__()
        self.sessions: set[str] = set()

    async def on_response(self, response: httpx2.Response) -> None:
        await super().on_response(response)
        if session := response.request.headers.get("mcp-session-id"):
            self.sessions.add(session)


@dataclass
class Outcomes:
    mode: str
    inbox: SessionInbox = field(default_factory=SessionInbox)
    results: list[tuple[float, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def served_again_after(self, kill: float) -> float | None:
        """Seconds from the kill to the first call that succeeded after it (the rest of the loop too)."""
        after = [(at, ok) for at, ok in self.results if at > kill]
        for index, (at, ok) in enumerate(after):
            if ok and all(later for _, later in after[index:]):
                return at - kill
        return None


@pytest.fixture(scope="module")
def sentinel_fleet(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SentinelRedis, DaphneServer, ServerProcess]]:
    folder = tmp_path_factory.mktemp("sentinel")
    redis_servers = SentinelRedis(folder).start()
    env = {**e2e_env, "REDIS_URL": redis_servers.url, "MCP_BACKGROUND_TOOLS": "celery"}
    env.pop("CELERY_BROKER_URL", None)
    try:
        daphne = start_daphne("daphne-sentinel", env, folder)
        worker = start_celery_worker("worker-sentinel", env, folder)
        yield redis_servers, daphne, worker
        worker.stop()
        daphne.stop()
    finally:
        redis_servers.stop()


async def _call_in_a_loop(url: str, outcomes: Outcomes, stop: asyncio.Event) -> None:
    async with mcp_client(url, outcomes.inbox, mode=outcomes.mode) as client:
        while not stop.is_set():
            try:
                result = await client.call_tool("add", {"a": 2, "b": 3})
                ok = not result.is_error and result.content[0].text == "5"
                if not ok:
                    outcomes.errors.append(repr(result)[:200])
            except Exception as error:  # noqa: BLE001 - an outage's refusal, whatever its form, is counted
                outcomes.errors.append(repr(error)[:200])
                ok = False
            outcomes.results.append((time.monotonic(), ok))
            await asyncio.sleep(0.05)


STREAM_STEPS = 30
STREAM_DELAY = 0.2


async def _count_across_the_kill(url: str) -> tuple[list[int], list[int], dict[str, Any]]:
    """A legacy call streaming a step every STREAM_DELAY s across the kill: the steps the client saw live,
    the steps stored for a resume (replayed from the first event), and the stream's last message."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
        headers = await open_legacy_session(http, url)
        call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "count_slowly",
                "arguments": {"n": STREAM_STEPS, "delay": STREAM_DELAY},
                "_meta": {"progressToken": "s"},
            },
        }
        response = await http.post(url, headers=headers, json=call)
        seen = events_of(response.text)
        live = [m["params"]["progress"] for _, m in seen if m.get("method") == "notifications/progress"]
        first = next(event_id for event_id, _ in seen if event_id)
        resumed = await http.get(
            url, headers={**headers, "Accept": "text/event-stream", "Last-Event-ID": first}
        )
        rest = events_of(resumed.text)
        stored = [m["params"]["progress"] for _, m in rest if m.get("method") == "notifications/progress"]
        return live, stored, seen[-1][1]


async def test_every_redis_use_goes_through_sentinel_to_the_primary(
    sentinel_fleet: tuple[SentinelRedis, DaphneServer, ServerProcess],
) -> None:
    redis_servers, daphne, _ = sentinel_fleet
    for mode in ("legacy", "auto"):
        async with mcp_client(daphne.mcp_url(), mode=mode) as client:
            assert (await client.call_tool("echo", {"message": mode})).content[0].text == mode
            # A background tool: queued on the broker, run by the worker, its replies through the layer.
            counted = await client.call_tool("count_in_background", {"n": 3, "delay": 0.05})
            assert counted.content[0].text == "Counted to 3.", counted
    _, port = redis_servers.primary()
    keys = {key.decode().split(":")[1] for key in redis.Redis(port=port).keys("mcp:*")}
    # Stored events and their streams (the sessions), the worker's presence: all on the primary.
    assert {"events", "stream", "workers"} <= keys, keys


async def test_the_primary_killed_under_load_every_client_is_served_again_on_its_session(
    sentinel_fleet: tuple[SentinelRedis, DaphneServer, ServerProcess],
) -> None:
    redis_servers, daphne, _ = sentinel_fleet
    stop = asyncio.Event()
    clients = [Outcomes(mode) for mode in ("legacy", "auto") for _ in range(CLIENTS_PER_MODE)]
    loops = [asyncio.create_task(_call_in_a_loop(daphne.mcp_url(), each, stop)) for each in clients]
    await wait_until(lambda: all(sum(ok for _, ok in each.results) >= 3 for each in clients), "each served")
    await asyncio.sleep(0.5)  # the sessions' keys reach the replica

    stream = asyncio.create_task(_count_across_the_kill(daphne.mcp_url()))
    await asyncio.sleep(1.0)
    killed = time.monotonic()
    old_port = await asyncio.to_thread(redis_servers.kill_primary)
    failover = await asyncio.to_thread(redis_servers.wait_for_failover, old_port)
    deadline = time.monotonic() + RESUME_SECONDS
    while time.monotonic() < deadline:
        if all(
            sum(ok for at, ok in each.results if at > killed + failover) >= AFTER_RECOVERY_CALLS
            for each in clients
        ):
            break
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*loops)
    live, stored, final = await stream

    resumed = {f"{each.mode}#{index}": each.served_again_after(killed) for index, each in enumerate(clients)}
    refused = sum(not ok for each in clients for _, ok in each.results)
    print(
        f"\nSentinel failover: promoted after {failover:.2f} s; served again after {resumed}; {refused} refused"
    )
    # The stream that ran across the kill reached its client whole; the events made while no primary
    # took writes were sent but not stored (a resume cannot replay them): that is the loss window.
    missing = sorted(set(range(2, STREAM_STEPS + 1)) - set(stored))
    lost_seconds = len(missing) * STREAM_DELAY
    print(
        f"stream events not stored: steps {missing} ({lost_seconds:.1f} s of a step every {STREAM_DELAY} s)"
    )
    assert live == list(range(1, STREAM_STEPS + 1)), live
    assert final["result"]["content"][0]["text"] == f"Counted to {STREAM_STEPS}.", final
    assert stored == sorted(set(stored)) and stored[-1] == STREAM_STEPS, stored
    assert lost_seconds <= failover + 1.0, (missing, failover)
    # The broker moved too: a background tool runs on the worker after the failover.
    async with mcp_client(daphne.mcp_url()) as client:
        counted = await client.call_tool("count_in_background", {"n": 2, "delay": 0.05})
        assert counted.content[0].text == "Counted to 2.", counted
    errors = {error for each in clients for error in each.errors}
    assert all(seconds is not None and seconds <= RESUME_SECONDS for seconds in resumed.values()), (
        resumed,
        errors,
    )
    # Each legacy client kept the one session it opened before the kill: the replica had its key.
    assert [len(each.inbox.sessions) for each in clients if each.mode == "legacy"] == [1] * CLIENTS_PER_MODE
    assert not any(each.inbox.sessions for each in clients if each.mode == "auto")  # 2026-07-28: none
