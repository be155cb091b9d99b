"""Where a self-check asked for over the web runs (AMB-276): never on the serving loop or its threads.

The admin's "Check this tenant" and ``POST /api/v1/tenants/<slug>/check/`` hand the check to this
module. Each check runs in a process of its own (``content/forked.py``: forked from the render processes'
forkserver, Django already set up) at a lower CPU priority, so its listings of thousands of
tools, its schema work, dry runs and upstream probes take neither the serving event loop, nor asgiref's
threads, nor the GIL of the process that serves other tenants. At most ``WORKERS`` checks run at once
per serving process (a bounded pool of threads that each wait on one such process); a tenant has at
most one running: a second request while it runs waits for that same run and gets its report, marked
``joined`` (never an error, never a second run). A check past ``CHECK_SECONDS`` is killed and answered
with one error saying so.

When the database cannot be shared with another process (SQLite in memory: the test process), the check
runs in the pool's thread on an event loop of its own instead (``async_to_sync`` from a plain
thread: its ``sync_to_async`` calls come back to that thread, not to the serving ones).
``manage.py check_tenant`` is a process of its own and runs ``runner.run`` itself.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from asgiref.sync import async_to_sync
from django.db import close_old_connections

from mcp_app import federation
from mcp_app.content import forked
from mcp_app.selfcheck import runner
from mcp_app.selfcheck.report import ERROR, Finding, Report
from tenants import wall

logger = logging.getLogger(__name__)

# Checks of different tenants running at once in one serving process; more wait their turn.
WORKERS = 2
# A check that has not answered by then is killed (its dry runs and probes have deadlines of their own).
CHECK_SECONDS = 300.0

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mcp-selfcheck")
_lock = threading.Lock()
# slug -> the running check of that tenant (and when it started, on the wall clock).
_running: dict[str, tuple[Future[Report], float]] = {}


def check(slug: str, tenant_id: int, network: bool = True) -> Report:
    """The tenant's report, from the check running now or a new one; blocks the calling thread (a view's
    own) until it is there. The caller has decided the person may check the tenant."""
    with _lock:
        running = _running.get(slug)
        joined = running is not None
        if running is None:
            started = time.time()
            future = _pool.submit(_run, slug, tenant_id, network, started)
            running = _running[slug] = (future, started)
            future.add_done_callback(functools.partial(_forget, slug))
    future, started = running
    report = future.result()
    if not joined:
        return report
    return dataclasses.replace(report, joined=True, started_at=started)


def running(slug: str) -> bool:
    with _lock:
        return slug in _running


def _forget(slug: str, future: Future[Report]) -> None:
    with _lock:
        if _running.get(slug, (None,))[0] is future:
            del _running[slug]


def _run(slug: str, tenant_id: int, network: bool, started: float) -> Report:
    try:
        report = _in_process(slug, tenant_id, network)
    except Exception:
        logger.exception("the self-check of %s failed", slug)
        report = _failed(slug, network, "The check stopped on an unexpected error; see the server's log.")
    report.started_at = started
    return report


def _failed(slug: str, network: bool, message: str) -> Report:
    return Report(tenant=slug, network=network, findings=[Finding(ERROR, "tenant", "", "check", message)])


def _in_thread(slug: str, tenant_id: int, network: bool) -> Report:
    with wall.tenant(tenant_id):
        try:
            return async_to_sync(_checked)(slug, network)
        finally:
            close_old_connections()


async def _checked(slug: str, network: bool) -> Report:
    try:
        return await runner.run(slug, network=network)
    finally:
        await federation.close_all()  # the loop ends with the check (federation/__init__.py)


def _in_process(slug: str, tenant_id: int, network: bool) -> Report:
    try:
        return forked.run(_in_thread, slug, tenant_id, network, timeout=CHECK_SECONDS)
    except forked.Lost as exc:
        return _failed(slug, network, str(exc))
