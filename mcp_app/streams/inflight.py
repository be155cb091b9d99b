"""Requests running in this process, so that notifications/cancelled can stop them (UT-10..14).

A request runs in its own task, detached from the HTTP connection (HT-19: a disconnect is not a
cancellation). A cancel for a request this process does not run is published to the session's
channel-layer group as {"type": "mcp.cancel"}; the process that runs it listens there. It only
starts listening once a request has run for LISTEN_AFTER_SECONDS, so quick requests cost nothing.
A cancel published before it listens would be lost, so the cancel is also left in Redis for a
minute (PENDING_KEY) and the listener reads it right after joining the group: published before the
join, the key was set before it too; published after, the group delivers it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_incrementing

from mcp_app.infra import notify, redis_client

logger = logging.getLogger(__name__)

LISTEN_AFTER_SECONDS = 0.2
PENDING_SECONDS = 60


def _pending_key(session_id: str, key: str) -> str:
    return f"mcp:cancel:{session_id}:{key}"


@dataclass
class InFlight:
    task: asyncio.Task
    cancelled: asyncio.Event


_running: dict[tuple[str, str], InFlight] = {}


def _key(request_id: Any) -> str:
    # 1 and "1" are different JSON-RPC ids (BP-04): the key is the id's JSON. An int's JSON is its
    # str(), spelled out because this runs twice on every request (json.dumps is ~5 calls).
    if type(request_id) is int:
        return str(request_id)
    return json.dumps(request_id)


def register(session_id: str, request_id: Any, task: asyncio.Task, cancelled: asyncio.Event) -> None:
    _running[(session_id, _key(request_id))] = InFlight(task, cancelled)
    if redis_client.enabled():
        _listener().watch(session_id)


def unregister(session_id: str, request_id: Any, task: asyncio.Task) -> None:
    key = (session_id, _key(request_id))
    entry = _running.get(key)
    if entry is not None and entry.task is task:
        del _running[key]
        if redis_client.enabled():
            _listener().unwatch(session_id)


def running(session_id: str, request_id: Any) -> bool:
    return (session_id, _key(request_id)) in _running


def cancel_local(session_id: str, request_id: Any, reason: Any = None) -> bool:
    """Cancel the request if this process runs it; True when it did."""
    return _cancel_key(session_id, _key(request_id), reason)


def _cancel_key(session_id: str, key: str, reason: Any = None) -> bool:
    entry = _running.pop((session_id, key), None)
    if entry is None:
        return False
    logger.info("request %s of session %.8s cancelled: %s", key, session_id, reason)
    entry.cancelled.set()
    entry.task.cancel()
    return True


def cancel_session(session_id: str) -> int:
    """Cancel every request of the session this process runs (the session ended)."""
    keys = [key for key in _running if key[0] == session_id]
    for key in keys:
        entry = _running.pop(key)
        entry.cancelled.set()
        entry.task.cancel()
    return len(keys)


async def cancel(session_id: str, request_id: Any, reason: Any = None) -> None:
    """Cancel the request wherever it runs; unknown or finished ids are ignored (UT-11, UT-12)."""
    if cancel_local(session_id, request_id, reason):
        return
    if redis_client.enabled():
        await announce(session_id, request_id, reason)


async def announce(session_id: str, request_id: Any, reason: Any = None) -> None:
    """Tell the process that runs the request (if any): first the key, read by a process that starts
    listening later, then the message, for one that listens already."""
    await redis_client.client().set(_pending_key(session_id, _key(request_id)), "1", ex=PENDING_SECONDS)
    await notify.apublish_session(
        session_id,
        {"type": "mcp.cancel", "session_id": session_id, "request_id": request_id, "reason": reason},
    )


class _Listener:
    """This process's channel on the session groups of its long-running requests."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.channel: str | None = None
        self.watched: dict[str, int] = {}
        self.since: dict[str, float] = {}  # when a watched session's running requests began
        self.timer: asyncio.TimerHandle | None = None  # the next check for sessions to join
        self.joined: set[str] = set()
        self.task: asyncio.Task | None = None
        self.pending: set[asyncio.Task] = set()

    def watch(self, session_id: str) -> None:
        self.watched[session_id] = self.watched.get(session_id, 0) + 1
        if self.watched[session_id] == 1:
            self.since[session_id] = self.loop.time()
            # One timer for all sessions, not one per request: quick requests come and go under it,
            # where a timer each piled up in the loop's heap (16 comparisons a request at 1,000 rps).
            if self.timer is None:
                self.timer = self.loop.call_later(LISTEN_AFTER_SECONDS, self._join_due)

    def unwatch(self, session_id: str) -> None:
        count = self.watched.get(session_id, 0) - 1
        if count > 0:
            self.watched[session_id] = count
            return
        self.watched.pop(session_id, None)
        self.since.pop(session_id, None)
        if session_id in self.joined:
            self.joined.discard(session_id)
            self._spawn(self._leave(session_id))

    def _spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def _join_due(self) -> None:
        """Join the sessions whose requests have run LISTEN_AFTER_SECONDS; check again for the rest."""
        self.timer = None
        # The loop may run a timer up to its clock resolution early: a millisecond's slack.
        due = self.loop.time() - LISTEN_AFTER_SECONDS + 0.001
        later: float | None = None
        for session_id, since in list(self.since.items()):
            if since > due:
                later = since if later is None else min(later, since)
                continue
            del self.since[session_id]
            if session_id not in self.joined:
                self.joined.add(session_id)
                self._spawn(self._join(session_id))
        if later is not None:
            self.timer = self.loop.call_at(later + LISTEN_AFTER_SECONDS, self._join_due)

    async def _join(self, session_id: str) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            if self.channel is None:
                self.channel = await layer.new_channel()
            if self.task is None or self.task.done():
                self.task = self.loop.create_task(self._receive(layer, self.channel))
            await layer.group_add(notify.session_group(session_id), self.channel)
            # A cancel published before the join: its key was set before the publish (see cancel()).
            keys = [key for sid, key in list(_running) if sid == session_id]
            if keys:
                found = await redis_client.client().mget([_pending_key(session_id, key) for key in keys])
                for key, value in zip(keys, found, strict=True):
                    if value is not None:
                        _cancel_key(session_id, key, "cancelled before this process listened")
        except Exception as exc:
            # Only a cancel sent from another process is lost; local cancels do not need the group.
            self.joined.discard(session_id)
            logger.warning("cancel listener could not join session %.8s: %r", session_id, exc)

    async def _leave(self, session_id: str) -> None:
        layer = get_channel_layer()
        if layer is not None and self.channel is not None:
            try:
                await layer.group_discard(notify.session_group(session_id), self.channel)
            except Exception as exc:  # the group entry expires on its own (group_expiry)
                logger.debug("cancel listener could not leave session %.8s: %r", session_id, exc)

    def _worth_retrying(self, exc: BaseException) -> bool:
        # Nothing to listen for: stop quietly; the next long request starts a new receive loop.
        return bool(self.joined) and not isinstance(exc, asyncio.CancelledError)

    async def _receive(self, layer: Any, channel: str) -> None:
        # Each read is retried on its own (a timeout under load is routine: said once per run of
        # failures, not every time), waiting 0.1 s more each time, at most 2 s.
        receive = AsyncRetrying(
            retry=retry_if_exception(self._worth_retrying),
            wait=wait_incrementing(start=0.1, increment=0.1, max=2.0),
            before_sleep=_log_retry,
            reraise=True,
        )
        while True:
            try:
                event: dict[str, Any] = await receive(layer.receive, channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.task = None
                return
            session_id = event.get("session_id")
            if event.get("type") == "mcp.cancel" and session_id:
                cancel_local(session_id, event.get("request_id"), event.get("reason"))
            elif event.get("type") == "mcp.session_closed" and session_id:
                cancel_session(session_id)


def _log_retry(state: RetryCallState) -> None:
    log = logger.warning if state.attempt_number == 1 else logger.debug
    exc = state.outcome.exception() if state.outcome else None
    log("cancel listener could not receive (%s in a row), retrying: %r", state.attempt_number, exc)


_listeners: dict[asyncio.AbstractEventLoop, _Listener] = {}


def _listener() -> _Listener:
    loop = asyncio.get_running_loop()
    found = _listeners.get(loop)
    if found is None:
        for old in [key for key in _listeners if key.is_closed()]:
            del _listeners[old]
        found = _listeners[loop] = _Listener()
    return found
