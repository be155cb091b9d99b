"""A POST stream whose process was lost while a background tool ran for it: the process its client
resumes on takes the relay over (AMB-369, issue 35 §1).

The run goes on on its worker, which keeps every reply in the job's Redis stream (background/contract.py);
the lost owner stored, with each reply it relayed, marks naming the job and that reply
(streams/events.py). The resuming process claims the stream (`claim_orphan`: one transaction, so one
process alone takes it, and only once its owner's sign of life is gone), then, detached from the
resuming connection as a POST's requests are (HT-19), relays each job's later replies and its result
onto the stream, as the owner would have. A request of the stream with no job (an inline tool died with
its process) is answered lost, as before (AMB-88). A stream with no job is finished as lost at once
(`finish_orphan`). The resumer itself only reads the store: nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from mcp_app.protocol import tools
from mcp_app.protocol.jsonrpc import InternalError, JsonRpcError, error_response, response
from mcp_app.streams import events, inflight

logger = logging.getLogger(__name__)

Message = dict[str, Any]

# Relays taken over, referenced until done: the loop holds tasks only weakly.
_tasks: set[asyncio.Task] = set()


async def take_over(info: events.StreamInfo, stream_id: str) -> bool:
    """Take over, or finish as lost, a POST stream whose owner is gone; True when this call did either
    (the resumer then reads on), False when the owner lives or another process was first."""
    store = events.get_store()
    orphan = await store.claim_orphan(info, stream_id)
    if orphan is None:
        return await store.finish_orphan(info, stream_id)
    task = asyncio.get_running_loop().create_task(_Takeover(stream_id, info.session_id, orphan).run())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return True


class _StreamEmit:
    """A relayed job's emit here: onto the stream as its owner, marked as the lost owner marked (a
    RelayingEmit), so that this process too can be lost and taken over."""

    def __init__(self, takeover: _Takeover) -> None:
        self.takeover = takeover

    async def __call__(self, message: Message) -> None:
        await self.takeover.store(message)

    async def relayed(self, message: Message, marks: dict[str, str]) -> None:
        await self.takeover.store(message, marks=marks)


class _Takeover:
    def __init__(self, stream_id: str, session_id: str, orphan: events.Orphan) -> None:
        self.stream_id, self.session_id, self.orphan = stream_id, session_id, orphan
        answered = {json.dumps(m.get("id")) for m in orphan.stored if "method" not in m}
        # The jobs whose call is not answered yet, by their request's id.
        self.jobs = {
            json.dumps(job.get("request_id")): (job, after)
            for job, after in orphan.jobs.values()
            if json.dumps(job.get("request_id")) not in answered
        }
        self.outstanding = len(self.jobs)

    async def store(self, message: Message, final: bool = False, marks: dict[str, str] | None = None) -> None:
        try:
            await events.get_store().append(
                self.stream_id,
                self.session_id,
                "post",
                message,
                final=final,
                request_ids=self.orphan.request_ids,
                marks=marks,
            )
        except Exception:  # the resumer waits on; a later resume may take it over again
            logger.exception("stream %s: could not store a relayed event", self.stream_id)

    async def run(self) -> None:
        events.owner_beat.started()
        try:
            lost = [
                message
                for message in events.lost_responses(self.orphan.request_ids, self.orphan.stored)
                if json.dumps(message["id"]) not in self.jobs
            ]
            for i, message in enumerate(lost):
                await self.store(message, final=not self.jobs and i == len(lost) - 1)
            if not self.jobs and not lost:
                await events.get_store().mark_done(self.stream_id)
            await asyncio.gather(*(self._follow(job, after) for job, after in self.jobs.values()))
        finally:
            events.owner_beat.ended()

    async def _follow(self, job: dict[str, Any], after: str) -> None:
        """Relay one job on, then store its call's response (the stream's last once none is left)."""
        request_id = job.get("request_id")
        cancelled = asyncio.Event()
        this = asyncio.current_task()
        assert this is not None
        # notifications/cancelled for the call reaches its relay here now (streams/inflight.py).
        inflight.register(self.session_id, request_id, this, cancelled)
        answer: Message | None
        try:
            result = await tools.follow_background(job, _StreamEmit(self), cancelled, after)
            answer = response(request_id, result)
        except asyncio.CancelledError:
            answer = None  # a cancelled request gets no response (UT-10)
        except JsonRpcError as error:
            answer = error_response(request_id, error)
        except Exception:
            logger.exception("stream %s: the relay taken over failed", self.stream_id)
            answer = error_response(request_id, InternalError())
        finally:
            inflight.unregister(self.session_id, request_id, this)
        self.outstanding -= 1
        if answer is not None:
            await self.store(answer, final=self.outstanding == 0)
        elif self.outstanding == 0:
            await events.get_store().mark_done(self.stream_id)
