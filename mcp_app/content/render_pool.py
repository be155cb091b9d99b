"""Render processes a template can be sent to, and killed in (AMB-98).

Each serving (or worker) process keeps up to ``MCP_TEMPLATE_PROCESSES`` render processes, forked from
one forkserver that imported Django once (``render_boot``), and lets one tenant use at most
``MCP_TEMPLATE_PROCESSES_PER_TENANT`` of them at a time: a tenant whose templates are hostile waits
for its own share and never takes the last process from the others. A job's caller that stops
waiting (its tool's timeout, a cancellation, a disconnect) kills the process rendering for it; the
next job forks a new one. The bookkeeping is thread-safe and bound to no event loop, so every loop
of the process (tests run many) shares one pool.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import multiprocessing
import multiprocessing.process
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext
from typing import Any

from django.conf import settings

from mcp_app.content import render_worker
from mcp_app.core.errors import ContentError

logger = logging.getLogger(__name__)

# CPython's type of a process's authkey (private, absent from typeshed): looked up, not imported.
AuthenticationString: type[bytes] = vars(multiprocessing.process)["AuthenticationString"]

# Past the job's own deadline (the render stops itself there), how long before the process is killed.
KILL_MARGIN_SECONDS = 1.0

_mp: ForkServerContext | None = None
_mp_lock = threading.Lock()
_forking = threading.Lock()


def _context() -> ForkServerContext:
    global _mp
    with _mp_lock:
        if _mp is None:
            context = multiprocessing.get_context("forkserver")
            assert isinstance(context, ForkServerContext)
            context.set_forkserver_preload(["mcp_app.content.render_boot"])
            _mp = context
        return _mp


def forkserver_context() -> ForkServerContext:
    """The forkserver's context, for other work that wants a process with Django set up (the self-check)."""
    return _context()


def start_forkserver() -> None:
    """Start the render processes' forkserver now (it sets Django up: seconds on a busy machine)."""
    _context()
    forkserver.ensure_running()


def warm() -> None:
    """Start the forkserver in the background, so the first large template does not wait for it
    (unless MCP_TEMPLATE_WARM is off: then on first need)."""
    if not settings.MCP_TEMPLATE_WARM:
        return

    def start() -> None:
        try:
            start_forkserver()
        except (OSError, RuntimeError, ValueError):
            logger.warning("could not start the template render processes' forkserver", exc_info=True)

    threading.Thread(target=start, name="mcp-render-warm", daemon=True).start()


class _Lost(Exception):
    """The render process ended (killed, or out of memory) before it answered."""


class _Process:
    """One render process and the pipe to it; ``call`` runs in the pool's threads."""

    def __init__(self) -> None:
        mp = _context()
        self.conn, child = mp.Pipe()
        # A Celery pool child is "daemonic", and multiprocessing refuses daemonic processes children
        # lest they be orphaned; a render process ends when this end of its pipe closes, so it never is.
        # Its authkey is billiard's too, which refuses to be pickled for the forkserver: a key of our own
        # (before the Process, which copies it).
        with _forking:
            current = multiprocessing.current_process()
            config = vars(current)["_config"]  # the process's private settings (its authkey), not in typeshed
            if type(config.get("authkey")) is not AuthenticationString:
                # billiard's process object stands in for the current one there: set the stdlib's type.
                config["authkey"] = AuthenticationString(os.urandom(32))
            self.proc = mp.Process(
                target=render_worker.serve, args=(child,), daemon=True, name="mcp-template"
            )
            daemonic = config.pop("daemon", None)
            try:
                self.proc.start()
            finally:
                if daemonic is not None:
                    config["daemon"] = daemonic
        child.close()
        self.alive = True

    def call(self, job: tuple[Any, ...], timeout: float) -> tuple[str, Any]:
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout):
                self.kill()
                raise TimeoutError
            return self.conn.recv()
        except (EOFError, OSError) as exc:
            self.alive = False
            raise _Lost from exc
        finally:
            if not self.alive:
                self._reap()

    def kill(self) -> None:
        # Only a signal here (callable from the loop's thread): the thread in ``call`` sees the end
        # of the pipe, then reaps the process and closes it.
        self.alive = False
        if self.proc.pid is not None and self.proc.exitcode is None:
            self.proc.kill()

    def _reap(self) -> None:
        self.proc.join(timeout=5)
        self.conn.close()


class RenderPool:
    """At most ``size`` render processes, ``per_tenant`` of them for one tenant at a time."""

    def __init__(self, size: int, per_tenant: int) -> None:
        self.size = size
        self.per_tenant = max(1, min(per_tenant, size))
        self._lock = threading.Lock()
        self._idle: list[_Process] = []
        self._busy_total = 0
        self._busy: collections.Counter[str] = collections.Counter()
        self._waiters: collections.deque[tuple[str, asyncio.AbstractEventLoop, asyncio.Future[None]]] = (
            collections.deque()
        )
        # One thread per busy process plus one to fork: a render never waits on another's thread.
        self._threads = ThreadPoolExecutor(max_workers=size + 1, thread_name_prefix="mcp-render")

    def _fits(self, tenant: str) -> bool:
        return self._busy_total < self.size and self._busy[tenant] < self.per_tenant

    def _reserve(self, tenant: str) -> None:
        self._busy_total += 1
        self._busy[tenant] += 1

    def _release(self, tenant: str) -> None:
        with self._lock:
            self._busy_total -= 1
            self._busy[tenant] -= 1
            if not self._busy[tenant]:
                del self._busy[tenant]
            for waiter in list(self._waiters):
                waiting_tenant, loop, future = waiter
                if self._fits(waiting_tenant):
                    self._waiters.remove(waiter)
                    self._reserve(waiting_tenant)
                    loop.call_soon_threadsafe(self._grant, waiting_tenant, future)

    def _grant(self, tenant: str, future: asyncio.Future[None]) -> None:
        if future.done():  # its caller gave up before the grant arrived: pass the place on
            self._release(tenant)
        else:
            future.set_result(None)

    async def _acquire(self, tenant: str) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            # Every waiter was granted at the last release it fitted, so one that fits now may go first.
            if self._fits(tenant):
                self._reserve(tenant)
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((tenant, loop, future))
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                granted = future.done() and not future.cancelled()
                waiter = (tenant, loop, future)
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if granted:
                self._release(tenant)
            raise

    async def _process(self) -> _Process:
        with self._lock:
            while self._idle:
                process = self._idle.pop()
                if process.alive and process.proc.is_alive():
                    return process
        # Forking (the first time: starting the forkserver) must not block the loop.
        forking = asyncio.get_running_loop().run_in_executor(self._threads, _Process)
        try:
            return await asyncio.shield(forking)
        except asyncio.CancelledError:
            forking.add_done_callback(self._keep)  # its caller left: the next job gets the process
            raise

    def _keep(self, forking: asyncio.Future[_Process]) -> None:
        if not forking.cancelled() and forking.exception() is None:
            with self._lock:
                self._idle.append(forking.result())

    async def run(self, tenant: str, job: tuple[Any, ...], seconds: float) -> Any:
        """Run ``job`` in a render process for ``tenant``; its result, or ContentError with the reason."""
        await self._acquire(tenant)
        process: _Process | None = None
        try:
            try:
                process = await self._process()
            except (OSError, RuntimeError, ValueError):
                logger.exception("could not start a template render process")
                raise ContentError(
                    "The template could not be rendered: no render process could start."
                ) from None
            loop = asyncio.get_running_loop()
            try:
                status, result = await loop.run_in_executor(
                    self._threads, process.call, job, seconds + KILL_MARGIN_SECONDS
                )
            except asyncio.CancelledError:
                process.kill()
                raise
            except TimeoutError:
                raise ContentError(
                    f"The template did not finish rendering within {seconds:g} seconds."
                ) from None
            except _Lost:
                raise ContentError(
                    "The template's render was stopped: it needed more memory or time than allowed."
                ) from None
            if status != "ok":
                raise ContentError(result)
            return result
        finally:
            if process is not None and process.alive:
                with self._lock:
                    self._idle.append(process)
            self._release(tenant)


_pool: RenderPool | None = None
_pool_lock = threading.Lock()


def pool() -> RenderPool:
    """The process's render pool, sized from the settings on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = RenderPool(
                size=settings.MCP_TEMPLATE_PROCESSES,
                per_tenant=settings.MCP_TEMPLATE_PROCESSES_PER_TENANT,
            )
        return _pool
