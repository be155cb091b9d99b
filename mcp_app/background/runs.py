"""ToolRun rows: the history of background calls, and the only transitions a run may make.

queued → running (a worker claims it) → done | failed | cancelled | lost; queued → not_started |
cancelled. Each transition is one conditional UPDATE, so two parties (the caller giving up, a worker
starting) can never both win. The synchronous functions are called through database_sync_to_async.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from mcp_app.infra import redis_client
from mcp_app.models import ToolRun
from tenants import wall

logger = logging.getLogger(__name__)

PURGE_EVERY_SECONDS = 3600.0
MAX_EXCHANGES = 50  # questions kept per run
PROGRESS_TTL = 3600
_last_purge: float | None = None  # monotonic time of this process's last purge


def record_queued(job: dict[str, Any]) -> None:
    ToolRun.objects.create(
        job_id=job["id"],
        tenant_id=job["tenant_id"],
        tool_id=job["tool_id"],
        tool_name=job["tool_name"],
        user_id=job.get("user_id"),
        client_id=job.get("client_id") or "",
        subject=job.get("subject") or "",
        session_id=job.get("session_id") or "",
        arguments=job.get("arguments") or {},
    )
    _maybe_purge()


def _maybe_purge() -> None:
    global _last_purge
    now = time.monotonic()
    if _last_purge is not None and now - _last_purge < PURGE_EVERY_SECONDS:
        return
    _last_purge = now
    cutoff = timezone.now() - timedelta(days=settings.MCP_TOOL_RUN_RETENTION_DAYS)
    with wall.bypass("tool run retention"):  # every tenant's old runs, not only the caller's
        ToolRun.objects.filter(queued_at__lt=cutoff).delete()


def claim(job_id: str, worker: str) -> bool:
    """Move the run from queued to running; False when it is no longer queued (given up, cancelled)."""
    return bool(
        ToolRun.objects.filter(job_id=job_id, status=ToolRun.Status.QUEUED).update(
            status=ToolRun.Status.RUNNING, started_at=timezone.now(), worker=worker[:255]
        )
    )


def _close(
    job_id: str, from_statuses: tuple[str, ...], status: str, detail: str, result: dict[str, Any] | None
) -> bool:
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "detail": detail[:2000]}
    if result is not None:
        fields["result"] = result
    return bool(ToolRun.objects.filter(job_id=job_id, status__in=from_statuses).update(**fields))


async def close_run(
    job_id: str,
    from_statuses: tuple[str, ...],
    status: str,
    detail: str = "",
    result: dict[str, Any] | None = None,
) -> bool:
    """Record how a run ended (and what it returned), if it is still in one of `from_statuses`; never raises."""
    try:
        return await database_sync_to_async(_close)(job_id, from_statuses, status, detail, result)
    except Exception:
        logger.exception("could not record the end (%s) of background job %s", status, job_id)
        return False


def change_exchanges(
    job_id: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]
) -> bool:
    """The one way to edit a run's questions and answers: `change` gets them under a row lock and
    returns the new list (None: leave them); kept to the last MAX_EXCHANGES. False: no such run."""
    with transaction.atomic():
        run = ToolRun.objects.select_for_update().filter(job_id=job_id).only("pk", "exchanges").first()
        if run is None:
            return False
        changed = change([e for e in run.exchanges if isinstance(e, dict)])
        if changed is not None:
            run.exchanges = changed[-MAX_EXCHANGES:]
            run.save(update_fields=["exchanges"])
        return True


def _note_exchange(job_id: str, entry: dict[str, Any]) -> None:
    def add(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        # A task keeps its questions itself (protocol/task_input.py): the relayed copy is not kept twice.
        if any(e.get("key") and e.get("asked") == entry["asked"] for e in exchanges):
            return None
        return [*exchanges, entry]

    change_exchanges(job_id, add)


async def note_exchange(job_id: str, asked: dict[str, Any], answer: dict[str, Any]) -> None:
    """Keep a question the run's handler asked and what came of it, for the admin; never raises."""
    entry = {"asked": asked, **answer, "at": timezone.now().isoformat(timespec="seconds")}
    try:
        await database_sync_to_async(_note_exchange)(job_id, entry)
    except Exception:
        logger.exception("could not record a question of background job %s", job_id)


def _progress_key(job_id: str) -> str:
    return f"mcp:run:{job_id}:progress"


async def note_progress(job_id: str, params: dict[str, Any]) -> None:
    """The run's latest progress (notifications/progress params), for the admin's live view; never raises.

    One Redis SET per progress notification the server relays, off the database.
    """
    fields = {k: params[k] for k in ("progress", "total", "message") if k in params}
    try:
        await redis_client.client().set(_progress_key(job_id), json.dumps(fields), ex=PROGRESS_TTL)
    except Exception:
        logger.warning("could not keep the progress of background job %s", job_id, exc_info=True)


def progress_of(job_id: str) -> dict[str, Any] | None:
    """The latest progress a run reported ({progress, total?, message?}), or None."""
    if not redis_client.enabled():
        return None
    raw = redis_client.sync_client().get(_progress_key(job_id))
    return json.loads(raw) if raw else None


QUEUED, RUNNING = ToolRun.Status.QUEUED, ToolRun.Status.RUNNING


# A run that the serving process itself runs (an inline task, protocol/tasks.py) has no worker to
# record its end: the process beats this key while it runs it, so a process that died is noticed.
RUNNER_ALIVE_SECONDS = 10  # beats every second; a slow database read must not make a live run look dead
IN_SERVER = " (server)"  # the end of `ToolRun.worker` for such a run


def _runner_key(job_id: str) -> str:
    return f"mcp:run:{job_id}:runner"


async def runner_beat(job_id: str) -> None:
    """This process still runs `job_id` (Redis only; never raises)."""
    if not redis_client.enabled():
        return
    try:
        await redis_client.client().set(_runner_key(job_id), "1", ex=RUNNER_ALIVE_SECONDS)
    except Exception:
        logger.warning("could not beat for run %s", job_id, exc_info=True)


async def runner_gone(job_id: str) -> bool:
    """True when the process running `job_id` in itself stopped beating (False without Redis: unknown)."""
    if not redis_client.enabled():
        return False
    try:
        return not await redis_client.client().exists(_runner_key(job_id))
    except Exception:
        return False
