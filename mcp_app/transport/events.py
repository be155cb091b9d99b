"""Event store for resumable SSE streams (HT-32..35).

Every event sent on a stream is written here first, with id `<stream-id>-<seq>`: the stream id is
random and the sequence counts from 1, so ids are unique within the session and say which stream
they belong to. A `Last-Event-ID` replays only that stream's later events. Redis keeps them when
REDIS_URL is set (a list per stream, expiring after MCP_EVENT_RETENTION_SECONDS); otherwise this
process's memory does (the embedded default is a single process).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from mcp_app.infra import redis_client

EVENTS_PREFIX = "mcp:events:"
META_PREFIX = "mcp:stream:"
# How often a waiter polls Redis for events written by another process.
POLL_SECONDS = 0.1

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
class StreamInfo:
    """A stream's owner and kind ("post" for a request's stream, "get" for the standalone one)."""

    session_id: str
    kind: str
    done: bool  # the POST stream's last response has been stored


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
        self, stream_id: str, session_id: str, kind: str, message: Message, final: bool = False
    ) -> int:
        await self.open(stream_id, session_id, kind)
        stream = self._streams[stream_id]
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
        self, stream_id: str, session_id: str, kind: str, message: Message, final: bool = False
    ) -> int:
        meta = META_PREFIX + stream_id
        events = EVENTS_PREFIX + stream_id
        async with redis_client.client().pipeline(transaction=True) as pipe:
            # RPUSH returns the new length, which is the event's sequence number: atomic across processes.
            pipe.rpush(events, json.dumps(message, separators=(",", ":")))
            pipe.hsetnx(meta, "session", session_id)
            pipe.hsetnx(meta, "kind", kind)
            if final:
                pipe.hset(meta, "done", "1")
            pipe.expire(events, self._ttl())
            pipe.expire(meta, self._ttl())
            results = await pipe.execute()
        return int(results[0])

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
        return StreamInfo(data["session"], data.get("kind", "post"), data.get("done") == "1")

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
