"""Event store for resumable SSE streams (HT-32..35).

Longer than 400 lines: two stores of one interface (memory, Redis), the Redis one's script and its
transactions over a lost owner's streams, read together.

Every event sent on a stream is written here first, with id `<stream-id>-<seq>`: the stream id is
random and the sequence counts from 1, so ids are unique within the session and say which stream
they belong to. A `Last-Event-ID` replays only that stream's later events. Redis keeps them when
REDIS_URL is set (a list per stream, expiring after MCP_EVENT_RETENTION_SECONDS); otherwise this
process's memory does (the embedded default is a single process).

A POST's stream is produced by the one process running its requests (its "owner", named in the
stream's hash, with the ids of its requests). The owner keeps a sign of life in Redis while it
streams (`mcp:owner:<process>`, refreshed by every event and every OWNER_BEAT_SECONDS). A process
killed mid-call (SIGKILL, a crash) leaves a stream that would never end: a client resuming it on
another process gets, once the owner's sign is gone, one error response per request left unanswered,
stored as the stream's last events (AMB-88). Stored once, atomically (a transaction watching the
stream), and never followed: an append to a done stream is dropped, so a response late from a
process that was only slow cannot follow the error.

A background call's stream outlives its owner (AMB-369): each worker reply the owner relays is stored
with marks in the stream's hash (`job:<id>`: the job; `after:<id>`: the last reply of it stored), in
the same script as the event. A process resuming the stream once the owner's sign is gone claims it
(`claim_orphan`: the owner swapped in one transaction, so one process alone wins) and relays the rest
of the job's replies from there (streams/takeover.py); an append by any other process, the old owner
late, is dropped, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import redis.exceptions
from django.conf import settings

from mcp_app.core.context import RELAYED_AFTER, RELAYED_JOB
from mcp_app.infra import redis_client
from mcp_app.protocol.jsonrpc import INTERNAL_ERROR, RequestId

logger = logging.getLogger(__name__)

EVENTS_PREFIX = "mcp:events:"
META_PREFIX = "mcp:stream:"
OWNER_PREFIX = "mcp:owner:"
# How often a waiter polls Redis for events written by another process.
POLL_SECONDS = 0.1
# This process, as the owner of the POST streams it produces.
PROCESS_ID = secrets.token_hex(8)
# How often a streaming process renews its sign of life, and how long one lasts: a killed
# process's streams are finished by a resuming client within OWNER_TTL_SECONDS.
OWNER_BEAT_SECONDS = 1.0
OWNER_TTL_SECONDS = 4
LOST_MESSAGE = (
    "The server process running this request stopped before it answered (it was killed or crashed); "
    "whether the request took effect is unknown. Send it again if that is safe."
)

# RPUSH an event unless the stream is done or another process owns it; keep its session, kind, owner
# (and its sign of life), request ids and marks. KEYS: events, meta, owner's key. ARGV: message,
# session, kind, final, ttl, owner, request ids (JSON), owner ttl, then mark field and value pairs.
# Returns the event's sequence number, 0 when it was dropped.
_APPEND = """
if redis.call('HGET', KEYS[2], 'done') == '1' then return 0 end
if ARGV[6] ~= '' then
  local owner = redis.call('HGET', KEYS[2], 'owner')
  if owner and owner ~= ARGV[6] then return 0 end
end
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
for i = 9, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('HSETNX', KEYS[2], 'session', ARGV[2])
redis.call('HSETNX', KEYS[2], 'kind', ARGV[3])
if ARGV[6] ~= '' then
  redis.call('HSETNX', KEYS[2], 'owner', ARGV[6])
  redis.call('SET', KEYS[3], '1', 'EX', tonumber(ARGV[8]))
end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[2], 'ids', ARGV[7]) end
if ARGV[4] == '1' then redis.call('HSET', KEYS[2], 'done', '1') end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5]))
return n
"""

Message = dict[str, Any]


def new_stream_id() -> str:
    return secrets.token_hex(8)


def event_id(stream_id: str, seq: int) -> str:
    return f"{stream_id}-{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """Split `<stream-id>-<seq>`; None for anything else."""
    stream_id, sep, seq = value.strip().rpartition("-")
    if not sep or not seq.isdigit() or not stream_id or len(stream_id) > 64 or not stream_id.isalnum():
        return None
    return stream_id, int(seq)


@dataclass
class Orphan:
    """A POST stream this process took over from its dead owner (claim_orphan)."""

    request_ids: list[RequestId]
    stored: list[Message]
    # Per background job relayed on it: the job (as the relay marked it) and its last reply stored.
    jobs: dict[str, tuple[dict[str, Any], str]]


@dataclass
class StreamInfo:
    """A stream's owner and kind ("post" for a request's stream, "get" for the standalone one)."""

    session_id: str
    kind: str
    done: bool  # the POST stream's last response has been stored
    owner: str | None = None  # the process producing a POST stream (Redis only)


def lost_responses(request_ids: list[RequestId], stored: list[Message]) -> list[Message]:
    """The error response of each request of a stream whose owner died, for those with none stored."""
    answered = {
        json.dumps(m.get("id")) for m in stored if "method" not in m and ("result" in m or "error" in m)
    }
    return [
        {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL_ERROR, "message": LOST_MESSAGE}}
        for rid in request_ids
        if json.dumps(rid) not in answered
    ]


@dataclass
class _MemoryStream:
    info: StreamInfo
    events: list[Message] = field(default_factory=list)
    touched: float = field(default_factory=time.monotonic)
    changed: asyncio.Event | None = None


class MemoryEventStore:
    """In-process event store."""

    def __init__(self) -> None:
        self._streams: dict[str, _MemoryStream] = {}
        self._pruned = time.monotonic()

    def _prune(self) -> None:
        now = time.monotonic()
        retention = settings.MCP_EVENT_RETENTION_SECONDS
        if now - self._pruned < min(30.0, retention):
            return
        self._pruned = now
        for stream_id, stream in list(self._streams.items()):
            if now - stream.touched > retention:
                del self._streams[stream_id]

    def _get(self, stream_id: str) -> _MemoryStream | None:
        stream = self._streams.get(stream_id)
        if stream is not None and time.monotonic() - stream.touched > settings.MCP_EVENT_RETENTION_SECONDS:
            del self._streams[stream_id]
            return None
        return stream

    async def open(self, stream_id: str, session_id: str, kind: str) -> None:
        self._prune()
        if stream_id not in self._streams:
            self._streams[stream_id] = _MemoryStream(StreamInfo(session_id, kind, False))

    async def append(
        self,
        stream_id: str,
        session_id: str,
        kind: str,
        message: Message,
        final: bool = False,
        request_ids: list[RequestId] | None = None,
        marks: dict[str, str] | None = None,
    ) -> int:
        """`marks` matter to a takeover only, which one process never needs: ignored here."""
        await self.open(stream_id, session_id, kind)
        stream = self._streams[stream_id]
        if stream.info.done:
            return 0  # nothing follows a stream's last response
        stream.events.append(message)
        stream.touched = time.monotonic()
        if final:
            stream.info.done = True
        if stream.changed is not None:
            stream.changed.set()
            stream.changed = None
        return len(stream.events)

    async def mark_done(self, stream_id: str) -> None:
        stream = self._get(stream_id)
        if stream is not None:
            stream.info.done = True
            if stream.changed is not None:
                stream.changed.set()
                stream.changed = None

    async def info(self, stream_id: str) -> StreamInfo | None:
        stream = self._get(stream_id)
        return None if stream is None else stream.info

    async def read_after(self, stream_id: str, seq: int) -> list[tuple[int, Message]]:
        stream = self._get(stream_id)
        if stream is None:
            return []
        return [(i, message) for i, message in enumerate(stream.events[seq:], start=seq + 1)]

    async def finish_orphan(self, info: StreamInfo, stream_id: str) -> bool:
        """A process's own streams die with it: nothing here is ever orphaned."""
        return False

    async def claim_orphan(self, info: StreamInfo, stream_id: str) -> Orphan | None:
        return None

    async def wait(self, stream_id: str, seq: int, timeout: float) -> None:
        """Return when the stream has events after `seq` or is done, or after `timeout`."""
        stream = self._get(stream_id)
        if stream is None or len(stream.events) > seq or stream.info.done:
            return
        if stream.changed is None:
            stream.changed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for: see consumer.handle_post
                await stream.changed.wait()


class RedisEventStore:
    """Event store in Redis: list mcp:events:<stream> and hash mcp:stream:<stream>, both expiring."""

    def _ttl(self) -> int:
        return settings.MCP_EVENT_RETENTION_SECONDS

    async def open(self, stream_id: str, session_id: str, kind: str) -> None:
        meta = META_PREFIX + stream_id
        async with redis_client.client().pipeline(transaction=True) as pipe:
            pipe.hsetnx(meta, "session", session_id)
            pipe.hsetnx(meta, "kind", kind)
            pipe.expire(meta, self._ttl())
            pipe.expire(EVENTS_PREFIX + stream_id, self._ttl())
            await pipe.execute()

    async def append(
        self,
        stream_id: str,
        session_id: str,
        kind: str,
        message: Message,
        final: bool = False,
        request_ids: list[RequestId] | None = None,
        marks: dict[str, str] | None = None,
    ) -> int:
        """Store one event (one round trip); `request_ids` (a POST stream's) make this process its owner,
        unless another owns it already (then it is dropped: 0); `marks` go to the stream's hash with it."""
        # RPUSH returns the new length, which is the event's sequence number: atomic across processes.
        owner = PROCESS_ID if request_ids is not None else ""
        result = await redis_client.client().eval(
            _APPEND,
            3,
            EVENTS_PREFIX + stream_id,
            META_PREFIX + stream_id,
            OWNER_PREFIX + PROCESS_ID,
            json.dumps(message, separators=(",", ":")),
            session_id,
            kind,
            "1" if final else "0",
            self._ttl(),
            owner,
            json.dumps(request_ids) if request_ids is not None else "",
            OWNER_TTL_SECONDS,
            *[item for pair in (marks or {}).items() for item in pair],
        )
        return int(result)

    async def mark_done(self, stream_id: str) -> None:
        meta = META_PREFIX + stream_id
        async with redis_client.client().pipeline(transaction=True) as pipe:
            pipe.exists(meta)
            pipe.hset(meta, "done", "1")
            pipe.expire(meta, self._ttl())
            await pipe.execute()

    async def info(self, stream_id: str) -> StreamInfo | None:
        data = await redis_client.client().hgetall(META_PREFIX + stream_id)
        if not data or "session" not in data:
            return None
        return StreamInfo(
            data["session"], data.get("kind", "post"), data.get("done") == "1", data.get("owner")
        )

    async def finish_orphan(self, info: StreamInfo, stream_id: str) -> bool:
        """End a POST stream whose owner is gone: an error response for each request left unanswered.

        True when the stream was finished here (by this call). A transaction watching the stream: an
        event stored meanwhile (the owner was only slow) or another process finishing it first aborts it.
        """
        if info.done or not info.owner:
            return False
        client = redis_client.client()
        meta, events = META_PREFIX + stream_id, EVENTS_PREFIX + stream_id
        if await client.exists(OWNER_PREFIX + info.owner):
            return False
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(meta, events)
                if await pipe.hget(meta, "done") == "1" or await pipe.hget(meta, "owner") != info.owner:
                    return False  # finished, or taken over (claim_orphan), by another process
                ids = json.loads(await pipe.hget(meta, "ids") or "[]")
                stored = [json.loads(raw) for raw in await pipe.lrange(events, 0, -1)]
                lost = lost_responses(ids, stored)
                pipe.multi()
                for message in lost:
                    pipe.rpush(events, json.dumps(message, separators=(",", ":")))
                pipe.hset(meta, "done", "1")
                pipe.expire(events, self._ttl())
                pipe.expire(meta, self._ttl())
                await pipe.execute()
            except redis.exceptions.WatchError:
                return False
        logger.warning(
            "stream %s: its process %s is gone; %s request(s) answered as lost",
            stream_id,
            info.owner,
            len(lost),
        )
        return True

    async def claim_orphan(self, info: StreamInfo, stream_id: str) -> Orphan | None:
        """Make this process the owner of a POST stream whose owner is gone and which carries a
        background job (AMB-369); None when it is not to be taken over here.

        One transaction watching the stream: another process claiming or finishing it first, or the
        owner storing an event meanwhile (it was only slow), aborts this one.
        """
        if info.done or not info.owner or info.owner == PROCESS_ID:
            return None
        client = redis_client.client()
        meta, events = META_PREFIX + stream_id, EVENTS_PREFIX + stream_id
        if await client.exists(OWNER_PREFIX + info.owner):
            return None
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(meta, events)
                fields = await pipe.hgetall(meta)
                if fields.get("done") == "1" or fields.get("owner") != info.owner:
                    return None
                jobs = {
                    name[len(RELAYED_JOB) :]: (
                        json.loads(value),
                        fields.get(RELAYED_AFTER + name[len(RELAYED_JOB) :], "0"),
                    )
                    for name, value in fields.items()
                    if name.startswith(RELAYED_JOB)
                }
                if not jobs:
                    return None  # nothing runs on: finish_orphan answers its requests lost
                stored = [json.loads(raw) for raw in await pipe.lrange(events, 0, -1)]
                pipe.multi()
                pipe.hset(meta, "owner", PROCESS_ID)
                pipe.set(OWNER_PREFIX + PROCESS_ID, "1", ex=OWNER_TTL_SECONDS)
                await pipe.execute()
            except redis.exceptions.WatchError:
                return None
        logger.warning(
            "stream %s: its process %s is gone; this one relays its jobs on", stream_id, info.owner
        )
        return Orphan(json.loads(fields.get("ids") or "[]"), stored, jobs)

    async def read_after(self, stream_id: str, seq: int) -> list[tuple[int, Message]]:
        raw = await redis_client.client().lrange(EVENTS_PREFIX + stream_id, seq, -1)
        return [(i, json.loads(item)) for i, item in enumerate(raw, start=seq + 1)]

    async def wait(self, stream_id: str, seq: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis_client.client()
        while time.monotonic() < deadline:
            length = await client.llen(EVENTS_PREFIX + stream_id)
            if length > seq or await client.hget(META_PREFIX + stream_id, "done") == "1":
                return
            await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


class _OwnerBeat:
    """This process's sign of life while it produces POST streams (Redis only)."""

    def __init__(self) -> None:
        self.streams = 0
        self.task: asyncio.Task | None = None

    def started(self) -> None:
        self.streams += 1
        if not redis_client.enabled():
            return
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._beat())

    def ended(self) -> None:
        self.streams = max(0, self.streams - 1)

    async def _beat(self) -> None:
        while self.streams > 0:
            try:
                await redis_client.client().set(OWNER_PREFIX + PROCESS_ID, "1", ex=OWNER_TTL_SECONDS)
            except Exception:  # the next beat may get through; events renew the sign too
                logger.warning("could not renew this process's sign of life", exc_info=True)
            await asyncio.sleep(OWNER_BEAT_SECONDS)


owner_beat = _OwnerBeat()

_stores: dict[bool, MemoryEventStore | RedisEventStore] = {}


def get_store() -> MemoryEventStore | RedisEventStore:
    """Return the event store the settings select."""
    use_redis = redis_client.enabled()
    store = _stores.get(use_redis)
    if store is None:
        store = RedisEventStore() if use_redis else MemoryEventStore()
        _stores[use_redis] = store
    return store


def reset() -> None:
    """Forget in-process events (tests)."""
    _stores.pop(False, None)
