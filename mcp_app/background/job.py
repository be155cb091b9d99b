"""The Celery task of background tools (imported by the worker through mcpsite.celery)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from celery import shared_task, signals

from mcp_app.background import contract, presence, worker
from mcp_app.infra import redis_client
from mcp_app.usage import flush as usage_flush
from tenants import wall

_local = threading.local()
_presence: list[presence.Beater] = []  # this worker's, started when it is ready to take jobs


@signals.worker_ready.connect(weak=False)
def announce_presence(sender: Any, **_: object) -> None:
    """The worker takes jobs now: readiness and /metrics count it (AMB-113), per queue it consumes."""
    if not redis_client.enabled():
        return
    queues = sorted(sender.app.amqp.queues.consume_from)
    beater = presence.Beater(sender.hostname, queues)
    beater.start()
    _presence.append(beater)


@signals.worker_shutting_down.connect(weak=False)
@signals.worker_shutdown.connect(weak=False)
def withdraw_presence(**_: object) -> None:
    """A shutdown begins (warm: no new job, the running ones finish): counted no more at once."""
    while _presence:
        _presence.pop().stop()


@signals.worker_process_init.connect(weak=False)
def flush_the_childs_usage(**_: object) -> None:
    """In each pool child, where jobs call upstreams: their health reaches the database as a serving
    process's does (usage/flush.py, AMB-185), the child counted as a process of its own."""
    usage_flush.start_in_forked_child()


def _loop() -> asyncio.AbstractEventLoop:
    """This worker thread's event loop, kept across jobs.

    A loop per job (asyncio.run) would also mean new Redis connections per job: channels_redis and
    our client keep one pool per loop. Created lazily, so a prefork child never inherits its
    parent's loop.
    """
    loop = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
    return loop


@shared_task(name=contract.TASK_NAME, ignore_result=True)
def run_tool_job(job: dict[str, Any]) -> str:
    """Run one background tool call (see mcp_app.background.relay); what became of it is the task's return value."""
    loop = _loop()
    asyncio.set_event_loop(loop)
    with wall.tenant(job["tenant_id"]):  # the job's task and its threads see its tenant's rows only
        return loop.run_until_complete(worker.work(job))
