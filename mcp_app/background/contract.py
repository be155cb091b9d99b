"""The contract between the two sides of a background run: the process that received the call
(background/relay.py) and the Celery worker that runs it (background/worker.py).

The task's name (the caller enqueues by name and never imports the worker side), the job's Redis
keys (its cancel key, its worker's sign of life, the answers to its questions) and the timings each
side counts on.
"""

from __future__ import annotations

import logging

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
