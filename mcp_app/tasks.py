"""Celery tasks (found by the app's autodiscover_tasks): the worker side of background tools."""

from __future__ import annotations

import asyncio
from typing import Any

from celery import shared_task

from mcp_app import jobs


@shared_task(name="mcp_app.run_tool_job", ignore_result=True)
def run_tool_job(job: dict[str, Any]) -> str:
    """Run one background tool call (see mcp_app.jobs); what became of it is the task's return value."""
    # A loop per job: jobs share nothing in memory but the catalog cache, which is loop-free.
    return asyncio.run(jobs.work(job))
