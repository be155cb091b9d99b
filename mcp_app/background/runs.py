"""ToolRun rows: the history of background calls, and the only transitions a run may make.

queued → running (a worker claims it) → done | failed | cancelled | lost; queued → not_started |
cancelled. Each transition is one conditional UPDATE, so two parties (the caller giving up, a worker
starting) can never both win. The synchronous functions are called through database_sync_to_async.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from mcp_app.models import ToolRun

logger = logging.getLogger(__name__)

PURGE_EVERY_SECONDS = 3600.0
_last_purge: float | None = None  # monotonic time of this process's last purge


def record_queued(job: dict[str, Any]) -> None:
    ToolRun.objects.create(
        job_id=job["id"],
        tenant_id=job["tenant_id"],
        tool_id=job["tool_id"],
        tool_name=job["tool_name"],
        user_id=job.get("user_id"),
        client_id=job.get("client_id") or "",
        session_id=job.get("session_id") or "",
    )
    _maybe_purge()


def _maybe_purge() -> None:
    global _last_purge
    now = time.monotonic()
    if _last_purge is not None and now - _last_purge < PURGE_EVERY_SECONDS:
        return
    _last_purge = now
    cutoff = timezone.now() - timedelta(days=settings.MCP_TOOL_RUN_RETENTION_DAYS)
    ToolRun.objects.filter(queued_at__lt=cutoff).delete()


def claim(job_id: str, worker: str) -> bool:
    """Move the run from queued to running; False when it is no longer queued (given up, cancelled)."""
    return bool(
        ToolRun.objects.filter(job_id=job_id, status=ToolRun.Status.QUEUED).update(
            status=ToolRun.Status.RUNNING, started_at=timezone.now(), worker=worker[:255]
        )
    )


def _close(job_id: str, from_statuses: tuple[str, ...], status: str, detail: str = "") -> bool:
    return bool(
        ToolRun.objects.filter(job_id=job_id, status__in=from_statuses).update(
            status=status, finished_at=timezone.now(), detail=detail[:2000]
        )
    )


async def close_run(job_id: str, from_statuses: tuple[str, ...], status: str, detail: str = "") -> bool:
    """Record how a run ended, if it is still in one of `from_statuses`; never raises."""
    try:
        return await database_sync_to_async(_close)(job_id, from_statuses, status, detail)
    except Exception:
        logger.exception("could not record the end (%s) of background job %s", status, job_id)
        return False


QUEUED, RUNNING = ToolRun.Status.QUEUED, ToolRun.Status.RUNNING
