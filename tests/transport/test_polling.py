"""Polling: a long answer's stream closed after the tenant's seconds, resumed with Last-Event-ID (AMB-128..131)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import SUPPORTED_VERSIONS, V2025_11_25, V2026_07_28
from mcp_app.streams import polling
from tests.transport.support import Client, Response, call, messages
from tests.transport.test_stream_caps import capped, no_slots  # noqa: F401 - no_slots: autouse fixture
from tests.transport.test_streams import count_call, get_stream

pytestmark = pytest.mark.django_db(transaction=True)

RETRY_MS = 250
# Connections a polled call may take in these tests before one is called a loop.
MAX_CONNECTIONS = 12


def last_event_id(events: list[dict[str, str]]) -> str:
    return [e["id"] for e in events if "id" in e][-1]


async def resume(client: Client, event_id: str) -> Response:
    headers = {"accept": "text/event-stream", **client.session_headers(), "last-event-id": event_id}
    return await call("GET", client.path, headers=headers)


async def poll_to_the_end(client: Client, first: Response) -> tuple[list[dict[str, str]], list[Response]]:
    """Resume as the SDK does until the response arrives; every event seen, and each resume's answer."""
    seen = first.events()
    resumes: list[Response] = []
    while not any("result" in m or "error" in m for m in messages(seen)):
        assert len(resumes) < MAX_CONNECTIONS, "the call never ended"
        resumed = await resume(client, last_event_id(seen))
        assert resumed.status == 200, resumed.body
        resumes.append(resumed)
        seen += resumed.events()
    return seen, resumes


def assert_every_event_once(seen: list[dict[str, str]], n: int) -> None:
    sent = messages(seen)
    progress = [m["params"]["progress"] for m in sent if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, n + 1)), progress
    assert sent[-1]["id"] == 5 and sent[-1]["result"]["content"][0]["text"] == f"Counted to {n}."
    ids = [e["id"] for e in seen if e.get("event") == "message"]
    assert len(ids) == len(set(ids)), ids


async def test_a_2025_11_25_long_answer_is_closed_with_retry_and_resumed_to_its_end_with_each_event_once(
    tools_a,
):
    await sync_to_async(capped)(tools_a, stream_poll_seconds=1, stream_poll_retry_ms=RETRY_MS)
    client = Client()
    await client.initialize(V2025_11_25)
    # About 4.8 s against 1 s polls: several closes even when a loaded machine delays the first stream.
    first = await client.post(count_call(n=6, delay=0.8))
    assert first.status == 200 and first.headers["content-type"] == "text/event-stream"
    events = first.events()
    assert events[0]["id"].endswith("-0") and events[0]["retry"] == str(RETRY_MS)  # priming
    assert events[-1] == {"retry": str(RETRY_MS)}  # said again just before the close
    assert not any("result" in m for m in messages(events))  # closed before the response
    seen, resumes = await poll_to_the_end(client, first)
    assert len(resumes) >= 2  # the resumed connections were closed too, until the response
    assert all(r.events()[0] == {"retry": str(RETRY_MS)} for r in resumes)
    assert all(r.events()[-1] == {"retry": str(RETRY_MS)} for r in resumes[:-1])
    assert_every_event_once(seen, 6)


async def test_a_polled_stream_gives_its_slot_back_so_its_resume_fits_a_cap_of_one_per_session(tools_a):
    await sync_to_async(capped)(
        tools_a, stream_poll_seconds=1, stream_poll_retry_ms=RETRY_MS, max_streams_per_session=1
    )
    client = Client()
    await client.initialize(V2025_11_25)
    first = await client.post(count_call(n=4, delay=0.5))
    assert first.headers["content-type"] == "text/event-stream"  # the one slot: not answered quietly
    seen, _ = await poll_to_the_end(client, first)  # each resume is 200, none 429
    assert_every_event_once(seen, 4)
    fresh = await get_stream(client)  # every slot is back once the call has ended
    assert fresh.status == 200
    await fresh.disconnect()


@pytest.mark.parametrize(
    ("version", "seconds"),
    [("2025-06-18", 1), ("2025-03-26", 1), (V2025_11_25, 0)],
    ids=["2025-06-18-on-a-polling-tenant", "2025-03-26-on-a-polling-tenant", "2025-11-25-polling-off"],
)
async def test_a_stream_that_must_not_be_polled_stays_open_until_its_response(tools_a, version, seconds):
    await sync_to_async(capped)(tools_a, stream_poll_seconds=seconds, stream_poll_retry_ms=RETRY_MS)
    client = Client()
    await client.initialize(version)
    response = await client.post(count_call(n=4, delay=0.4))  # 1.6 s: past the polling tenant's second
    events = response.events()
    assert_every_event_once(events, 4)  # one connection held everything
    retries = [e["retry"] for e in events if "retry" in e]
    # 2025-11-25 primes with the operator's retry; older revisions are sent none.
    assert retries == ([str(django_settings.MCP_SSE_RETRY_MS)] if version == V2025_11_25 else [])


async def test_a_keep_alive_does_not_send_the_event_before_it_again(tools_a, settings):
    settings.MCP_SSE_KEEPALIVE_SECONDS = 1
    client = Client()
    await client.initialize(V2025_11_25)
    response = await client.post(count_call(n=2, delay=1.6))  # a keep-alive falls between the two
    assert b": keep-alive" in response.body
    assert_every_event_once(response.events(), 2)


@pytest.mark.parametrize("version", [*SUPPORTED_VERSIONS, V2026_07_28])
def test_only_2025_11_25_sessions_of_a_polling_tenant_are_polled(version):
    polling_tenant = TenantInfo(id=1, slug="t", name="t", stream_poll_seconds=30)
    assert polling.applies(polling_tenant, version) == (version == V2025_11_25)
    assert not polling.applies(TenantInfo(id=1, slug="t", name="t"), version)
    assert not polling.applies(None, version)


async def test_a_resumed_stream_gets_keep_alives_while_it_waits_for_the_rest_of_the_call(tools_a, settings):
    settings.MCP_SSE_KEEPALIVE_SECONDS = 0.3  # AMB-151: every stream idles the same way
    await sync_to_async(capped)(tools_a, stream_poll_seconds=1, stream_poll_retry_ms=RETRY_MS)
    client = Client()
    await client.initialize(V2025_11_25)
    first = await client.post(count_call(n=3, delay=1.2))  # a resume waits about 1 s for the next event
    seen, resumes = await poll_to_the_end(client, first)
    assert any(b": keep-alive" in r.body for r in resumes)
    assert_every_event_once(seen, 3)
