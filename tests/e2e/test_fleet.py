"""Three hosts behind a real load balancer (issue 35 §1): network namespaces on this machine, a Daphne in
each, HAProxy round-robin with health checks on `/health/ready` (tests/fleet/hosts.py). No sticky
sessions: a legacy session's requests land on every host and see one session; a host lost mid-call
leaves the client's next requests to the others. Background tools run on a Celery worker in a namespace
of its own, outside the balancer: losing a web host leaves it running."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost

from tests.e2e.helpers import REQUEST_SECONDS, mcp_client, open_legacy_session
from tests.e2e.servers import counting_tenant, require_services
from tests.e2e.test_daphne_kill import edit_tool
from tests.e2e.test_resume import counting_call, events_of
from tests.fleet.hosts import Fleet, available

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(scope="module")
def fleet(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_services("the hosts share one PostgreSQL", postgres=True)
    require_services("the hosts share sessions and streams through Redis")
    why = available()
    if why is not None:
        if e2e_env.get("MCP_E2E_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{why}: the fleet's hosts are network namespaces", pytrace=False)
        pytest.skip(f"{why}: the fleet's hosts are network namespaces")
    env = {**e2e_env, "MCP_BACKGROUND_TOOLS": "celery"}
    hosts = Fleet(env, tmp_path_factory.mktemp("fleet"), worker=True)
    try:
        yield hosts.open()
    finally:
        hosts.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_clients_requests_land_on_every_host_and_are_answered_as_one_server(
    fleet: Fleet, mode: str
) -> None:
    before = [host.served('"POST /t/demo/mcp') for host in fleet.hosts]
    async with mcp_client(fleet.mcp_url(), mode=mode) as client:
        for i in range(12):
            assert (await client.call_tool("add", {"a": i, "b": 1})).content[0].text == str(i + 1)
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
    served = [host.served('"POST /t/demo/mcp') - seen for host, seen in zip(fleet.hosts, before, strict=True)]
    assert all(count > 0 for count in served), f"POSTs per host: {served}"


async def test_a_dropped_stream_resumed_through_the_balancer_on_another_host_replays_each_missed_event_once(
    fleet: Fleet,
) -> None:
    steps, url = 6, fleet.mcp_url()
    call = counting_call(9, steps, "f")
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, url)
        seen: list[tuple[str | None, dict[str, Any]]] = []
        buffer = ""
        async with http.stream("POST", url, headers=headers, json=call) as response:
            ran_on = response.headers["x-fleet-host"]  # the balancer's name of the host
            async for chunk in response.aiter_text():
                buffer += chunk
                seen = [(i, m) for i, m in events_of(buffer) if m.get("method") == "notifications/progress"]
                if len(seen) >= 2:
                    break  # the connection drops here; the run goes on where it started
        resume = {**headers, "Accept": "text/event-stream", "Last-Event-ID": seen[-1][0] or ""}
        replays, hosts = [], []
        for _ in range(2):  # round-robin: two resumes in a row land on two hosts, one not the call's
            replayed = await http.get(url, headers=resume)
            replays.append(events_of(replayed.text))
            hosts.append(replayed.headers["x-fleet-host"])
    assert set(hosts) - {ran_on}, f"the call ran on {ran_on}, the resumes on {hosts}"
    assert replays[0] == replays[1]  # what a resume replays is stored, the same wherever it is read
    events = seen + replays[0]
    progress = [m["params"]["progress"] for _, m in events if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, steps + 1)), progress  # each step once, none lost, none twice
    assert (
        events[-1][1]["id"] == 9 and events[-1][1]["result"]["content"][0]["text"] == f"Counted to {steps}."
    )
    assert len({event_id for event_id, _ in events}) == len(events)


async def test_a_background_call_whose_host_is_lost_is_relayed_on_by_the_host_its_stream_is_resumed_on(
    fleet: Fleet,
) -> None:
    """Issue 35 §1 (AMB-369): the worker goes on counting after the host that took the call is killed;
    the client resumes through the balancer, a host still up takes the relay over, and every step
    reaches the client once, then the result. The lost host is brought back for the tests after."""
    steps, url = 8, fleet.mcp_url()
    # 0.8 s a step: some of the worker's replies come before the takeover (kept for the job), some after.
    call = counting_call(11, steps, "bg", tool="count_in_background", delay=0.8)
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_SECONDS)) as http:
        headers = await open_legacy_session(http, url)
        seen: list[tuple[str | None, dict[str, Any]]] = []
        buffer = ""
        async with http.stream("POST", url, headers=headers, json=call) as response:
            ran_on = response.headers["x-fleet-host"]
            async for chunk in response.aiter_text():
                buffer += chunk
                seen = [(i, m) for i, m in events_of(buffer) if m.get("method") == "notifications/progress"]
                if len(seen) >= 2:
                    break
        lost = next(host for host in fleet.hosts if f"h{host.index}" == ran_on)
        await asyncio.to_thread(lost.kill)
        try:
            resume = {**headers, "Accept": "text/event-stream"}
            events, hosts = list(seen), []
            # The resumes wait (bounded) for the rest; a resume that ends early is resumed again.
            for _ in range(6):
                replayed = await http.get(url, headers={**resume, "Last-Event-ID": events[-1][0] or ""})
                hosts.append(replayed.headers.get("x-fleet-host"))
                events += events_of(replayed.text)
                if "id" in events[-1][1]:
                    break
        finally:
            await asyncio.to_thread(fleet.restart, lost)
    assert ran_on not in hosts, f"the call ran on {ran_on}, the resumes on {hosts}"
    progress = [m["params"]["progress"] for _, m in events if m.get("method") == "notifications/progress"]
    final = events[-1][1]
    assert progress == list(range(1, steps + 1)), (progress, final)  # each step once, then the result
    assert final.get("id") == 11, final
    assert final["result"]["content"][0]["text"] == f"Counted to {steps}.", final
    assert len({event_id for event_id, _ in events}) == len(events)


async def test_a_host_lost_mid_call_leaves_the_clients_next_requests_to_the_others(fleet: Fleet) -> None:
    """Runs after the others but one: the host stays lost."""
    async with mcp_client(fleet.mcp_url()) as client:
        await client.call_tool("echo", {"message": "before"})
        calls = [
            asyncio.create_task(client.call_tool("count_slowly", {"n": 6, "delay": 0.25})) for _ in range(3)
        ]
        await asyncio.sleep(0.5)
        lost = fleet.hosts[0]
        await asyncio.to_thread(lost.kill)
        # The calls the lost host ran end with it (their stream was cut); the others finish.
        done = await asyncio.gather(*calls, return_exceptions=True)
        assert any(not isinstance(outcome, BaseException) for outcome in done), done
        before = [host.served('"POST /t/demo/mcp') for host in fleet.hosts[1:]]
        for i in range(8):  # the session lives on in Redis: the other hosts answer it
            assert (await client.call_tool("echo", {"message": f"after {i}"})).content[0].text == f"after {i}"
        served = [
            host.served('"POST /t/demo/mcp') - seen
            for host, seen in zip(fleet.hosts[1:], before, strict=True)
        ]
        assert all(count > 0 for count in served), f"POSTs per remaining host: {served}"


async def test_a_listen_stream_on_a_lost_host_is_reopened_on_another_and_hears_the_next_change(
    fleet: Fleet, e2e_env: dict[str, str]
) -> None:
    """2026-07-28 (no session): the stream breaks with its host; the SDK client listens again, the
    balancer sends it to a host still up, and the next change made anywhere reaches it. Runs last."""
    slug = await asyncio.to_thread(counting_tenant, e2e_env, "fleet-listen")
    listened_on: list[str] = []

    async def on_response(response: httpx2.Response) -> None:
        if response.request.headers.get("mcp-method") == "subscriptions/listen":
            listened_on.append(response.headers.get("x-fleet-host", ""))

    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0), event_hooks={"response": [on_response]}
    )
    transport = streamable_http_client(fleet.mcp_url(slug), http_client=http)
    async with http, Client(transport, read_timeout_seconds=REQUEST_SECONDS, cache=None) as client:
        async with client.listen(tools_list_changed=True) as sub:
            lost = next(host for host in fleet.hosts if f"h{host.index}" == listened_on[-1])
            await asyncio.to_thread(lost.kill)
            with anyio.fail_after(REQUEST_SECONDS), pytest.raises(SubscriptionLost):
                async for _ in sub:
                    pass
        async with client.listen(tools_list_changed=True) as sub:
            assert listened_on[-1] not in {"", f"h{lost.index}"}, listened_on
            await asyncio.to_thread(edit_tool, e2e_env, slug)
            with anyio.fail_after(REQUEST_SECONDS):
                event = await sub.__anext__()
    assert type(event).__name__ == "ToolsListChanged"
