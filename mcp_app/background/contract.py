"""The contract between the two sides of a background run: the process that received the call
(background/relay.py) and the Celery worker that runs it (background/worker.py).

The task's name (the caller enqueues by name and never imports the worker side), the job's Redis
keys (its cancel key, its worker's sign of life, the answers to its questions, its replies) and the
timings each side counts on; the call's context as both sides rebuild it from the job.

Each reply of the worker's is kept in the job's Redis stream (`mcp:job:<id>:replies`, XADD) before it
is sent, with its entry id, to the waiting process's channel (AMB-369): the channel is the fast path;
the stream is what outlives that process, for whichever process takes its client's stream over.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp_app.core.context import Asker, Emit, RequestContext, SessionState
from mcp_app.core.types import TenantInfo
from mcp_app.infra import redis_client

logger = logging.getLogger(__name__)

TASK_NAME = "mcp_app.run_tool_job"
# How long past a started job's tool timeout the server waits for the worker's answer.
REPLY_GRACE_SECONDS = 10.0
# How often a worker running a job tells the waiting server it is alive.
HEARTBEAT_SECONDS = 1.0
# How long a worker's last beat stays readable in Redis: a dead worker's key is gone this long after
# its last beat, and a quiet run's server looks again this often.
ALIVE_KEY_SECONDS = 2
# How often a worker checks whether its job was cancelled.
CANCEL_POLL_SECONDS = 0.2
# How long a cancelled handler may take to return after its `cancelled` event is set.
CANCEL_GRACE_SECONDS = 2.0
# How long a worker keeps retrying a result the server's reply channel cannot take (full).
RESULT_SEND_SECONDS = 30.0
CANCEL_KEY_TTL = 3600
# A job's cancel key holds who cancelled it: the client, or an operator in the admin ("admin:<name>").
CANCELLED_BY_CLIENT = "1"
CANCELLED_IN_ADMIN = "admin:"
# How long a worker blocks on Redis at a time for an answer, between checks for a cancellation.
ANSWER_POLL_SECONDS = 0.5


# At most this many replies are kept per job (a takeover relays no older one): about a megabyte for the
# demo's progress notifications.
REPLIES_KEPT = 5000


def replies_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:replies"


def reply_after(reply: str, mark: str) -> bool:
    """Whether Redis stream entry id `reply` comes after `mark` ("0": before every reply)."""

    def parts(entry: str) -> tuple[int, int]:
        ms, _, seq = entry.partition("-")
        return int(ms or 0), int(seq or 0)

    return parts(reply) > parts(mark)


def context(
    job: dict[str, Any], tenant: TenantInfo, emit: Emit, cancelled: asyncio.Event, ask: Asker | None = None
) -> RequestContext:
    """The call's context rebuilt from its job: on the worker, and where a relay is taken over (no
    `ask`: the client cannot be asked from there)."""
    session = None
    if job.get("session_id"):
        session = SessionState(
            id=job["session_id"],
            tenant_id=tenant.id,
            protocol_version=job["protocol_version"],
            client_capabilities=job.get("client_capabilities") or {},
            log_level=job.get("log_level"),
            initialized=True,
            user_id=job.get("user_id"),
            client_id=job.get("client_id"),
        )
    scopes = job.get("scopes")
    ctx = RequestContext(
        tenant=tenant,
        protocol_version=job["protocol_version"],
        session=session,
        client_capabilities=job.get("client_capabilities") or {},
        user_id=job.get("user_id"),
        client_id=job.get("client_id"),
        subject=job.get("subject"),
        scopes=frozenset(scopes) if scopes is not None else None,
        request_id=job.get("request_id"),
        progress_token=job.get("progress_token"),
        log_level=job.get("log_level"),
        emit=emit,
        cancelled=cancelled,
        call_id=job.get("call_id") or "",
    )
    return ctx if ask is None else ctx.but(ask=ask)


def cancel_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:cancelled"


def alive_key(job_id: str) -> str:
    return f"mcp:job:{job_id}:alive"


def answer_key(job_id: str, ask_id: str) -> str:
    return f"mcp:job:{job_id}:answer:{ask_id}"


async def request_cancel(job_id: str) -> None:
    """Tell the worker (whichever runs it, now or later) to stop the job."""
    try:
        await redis_client.client().set(cancel_key(job_id), CANCELLED_BY_CLIENT, ex=CANCEL_KEY_TTL)
    except Exception:
        logger.exception("could not cancel background job %s", job_id)


def cancel_from_admin(job_id: str, who: str) -> None:
    """An operator stops a run: its worker stops it (now, or when it picks it up) and tells the caller.

    Unlike a client's cancellation, the caller is still waiting, so it gets an isError result that
    says who stopped the run (background/worker.py). Raises when Redis cannot be reached.
    """
    redis_client.sync_client().set(cancel_key(job_id), f"{CANCELLED_IN_ADMIN}{who}", ex=CANCEL_KEY_TTL)


def admin_canceller(value: str | None) -> str | None:
    """Who cancelled a job in the admin, from its cancel key's value; None for a client's cancellation."""
    if value and value.startswith(CANCELLED_IN_ADMIN):
        return value[len(CANCELLED_IN_ADMIN) :] or "an operator"
    return None
