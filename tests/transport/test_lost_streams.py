"""Streams whose process died (AMB-88): a POST stream is ended once with the lost calls' errors (or,
relaying a background job, claimed by one process to relay it on, AMB-369), a GET stream is taken over
by its client's resume. The whole story with real processes and SIGKILL is
tests/e2e/test_daphne_kill.py."""

from __future__ import annotations

import json

import pytest
import redis
from django.conf import settings as django_settings

from mcp_app.protocol.jsonrpc import INTERNAL_ERROR
from mcp_app.streams import events
from tests.e2e.servers import require_services
from tests.transport.support import Client, call
from tests.transport.test_streams import get_stream

pytestmark = pytest.mark.django_db(transaction=True)

PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": 1, "progress": 1},
}


def test_each_request_without_a_stored_response_gets_one_lost_error_whatever_its_id_type():
    stored = [
        PROGRESS,
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": "q", "method": "ping"},
    ]
    lost = events.lost_responses([1, "1", "q"], stored)
    assert [m["id"] for m in lost] == ["1", "q"]  # 1 was answered; "q" was a question, not an answer
    assert all(m["error"] == {"code": INTERNAL_ERROR, "message": events.LOST_MESSAGE} for m in lost)


@pytest.fixture
def raw_redis():
    require_services("a stream outlives its process only in Redis")
    client = redis.Redis.from_url(django_settings.REDIS_URL, decode_responses=True)
    yield client
    client.close()


@pytest.mark.services
async def test_with_redis_a_stream_whose_owner_is_gone_is_ended_once_and_nothing_follows(raw_redis):
    store = events.get_store()
    stream = events.new_stream_id()
    await store.append(stream, "s1", "post", PROGRESS, request_ids=[7, 8])
    await store.append(stream, "s1", "post", {"jsonrpc": "2.0", "id": 8, "result": {}}, request_ids=[7, 8])
    info = await store.info(stream)
    assert info is not None and info.owner == events.PROCESS_ID and not info.done
    assert not await store.finish_orphan(info, stream)  # its owner (this process) is alive
    raw_redis.delete(events.OWNER_PREFIX + events.PROCESS_ID)  # as after a SIGKILL, once its sign ran out
    assert await store.finish_orphan(info, stream)
    assert not await store.finish_orphan(info, stream)  # another resume finds it done
    messages = [m for _, m in await store.read_after(stream, 0)]
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": INTERNAL_ERROR, "message": events.LOST_MESSAGE},
    }
    assert len(messages) == 3
    # A late response (its process was only slow) cannot follow the stream's end.
    assert (
        await store.append(stream, "s1", "post", {"jsonrpc": "2.0", "id": 7, "result": {}}, request_ids=[7])
        == 0
    )
    assert len(await store.read_after(stream, 0)) == 3


@pytest.mark.services
async def test_a_stream_relaying_a_background_job_is_claimed_by_one_process_once_its_owner_is_gone(
    raw_redis, monkeypatch
):
    """AMB-369: never while its owner lives (no double relay), once, and the old owner's late events
    are dropped after (nothing stored twice); a stream with no job is finish_orphan's."""
    store = events.get_store()
    stream, plain = events.new_stream_id(), events.new_stream_id()
    job = {"id": "J", "request_id": 7, "tool_name": "count_in_background"}
    marks = {"job:J": json.dumps(job), "after:J": "5-0"}
    monkeypatch.setattr(events, "PROCESS_ID", "lost-owner")
    await store.append(stream, "s1", "post", PROGRESS, request_ids=[7], marks=marks)
    await store.append(plain, "s1", "post", PROGRESS, request_ids=[8])
    info, plain_info = await store.info(stream), await store.info(plain)
    assert info is not None and plain_info is not None
    monkeypatch.setattr(events, "PROCESS_ID", "taker")
    assert await store.claim_orphan(info, stream) is None  # its owner is alive
    raw_redis.delete(events.OWNER_PREFIX + "lost-owner")  # as after a SIGKILL, once its sign ran out
    assert await store.claim_orphan(plain_info, plain) is None  # no job: finished as lost instead
    orphan = await store.claim_orphan(info, stream)
    assert orphan is not None and orphan.jobs == {"J": (job, "5-0")} and orphan.request_ids == [7]
    assert orphan.stored == [PROGRESS]
    assert await store.claim_orphan(info, stream) is None  # once
    assert not await store.finish_orphan(info, stream)  # taken over, not lost
    monkeypatch.setattr(events, "PROCESS_ID", "lost-owner")  # only slow, it stores late: dropped
    assert await store.append(stream, "s1", "post", PROGRESS, request_ids=[7]) == 0
    monkeypatch.setattr(events, "PROCESS_ID", "taker")
    assert await store.append(stream, "s1", "post", PROGRESS, request_ids=[7]) == 2
    raw_redis.delete(events.OWNER_PREFIX + "taker")


async def test_a_get_resuming_the_stream_that_holds_the_sessions_slot_takes_it_over(tools_a):
    client = Client("tenant-a")
    await client.initialize("2025-11-25")
    first = await get_stream(client)
    priming = await first.next_event()
    fresh = await call(
        "GET", client.path, headers={"accept": "text/event-stream", **client.session_headers()}
    )
    assert fresh.status == 409  # a second stream is still refused
    resumed = await get_stream(client, {"last-event-id": priming["id"]})
    assert resumed.status == 200
    await first.read_to_end()  # the connection taken over ends (it would wait for events otherwise)
    assert first.ended
    await resumed.disconnect()
