"""Fan-in: an upstream's list changes refresh our catalog while a process serves (AMB-180..183).

One `Watcher` per serving process (started by Daphne's reactor or the ASGI lifespan: transport/
lifespan.py) looks every MCP_UPSTREAM_WATCH_RESCAN_SECONDS at the enabled upstreams that announce
tool list changes (or whose capabilities are not known yet) and, up to MCP_UPSTREAM_WATCH_MAX of
them, takes each one's lease (infra/lease.py: one watching process in the deployment, renewed every
third of MCP_UPSTREAM_WATCH_LEASE_SECONDS, taken over by another process once it lapses). Each held
upstream gets a `Watch`: federation.change_stream listening (a legacy session's GET stream, or 2026-07-28
`subscriptions/listen`), reconnecting with a growing, jittered delay when the connection fails.

A change announced, and the moment the listener is (re)established (what changed while nobody listened
was not heard), mark the upstream dirty; MCP_UPSTREAM_WATCH_DEBOUNCE_MS later one `service.sync` runs,
however many notifications came in between, on a worker thread (the ORM and the SDK's discover, which
asgiref runs back on this loop). The sync is the admin's Sync now: a changed description is held for
review, a tool the upstream stopped offering is disabled, and only a change to a `Tool` row moves the
tenant's change token and tells our clients (signals/definitions.py), so a sync that finds nothing
new says nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import secrets
import socket
import time
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from mcp_app import federation
from mcp_app.catalog.apart import run_apart
from mcp_app.federation import change_stream
from mcp_app.infra.lease import Lease
from mcp_app.models import Upstream
from mcp_app.upstreams import service
from tenants import wall

logger = logging.getLogger(__name__)

# Tools are always synced into our catalog; prompts and resources only where the owner publishes them
# (AMB-190): elsewhere their changes would cost a discover and change nothing.
WATCHED_KINDS = ("tools",)


def watched_kinds(publish_prompts: bool, publish_resources: bool) -> tuple[str, ...]:
    """The lists whose changes an upstream's watch listens for."""
    return WATCHED_KINDS + ("prompts",) * publish_prompts + ("resources",) * publish_resources
# The first reconnection waits this long, each next one twice as long, up to MCP_UPSTREAM_WATCH_BACKOFF_SECONDS.
FIRST_BACKOFF_SECONDS = 1.0
# A connection that listened at least this long was good: its loss starts the delays over.
STABLE_SECONDS = 30.0
# How long a dropped watch may take to stop before the rescan goes on without it.
DROP_SECONDS = 5.0


def lease_name(upstream_id: int) -> str:
    return f"upstream-watch:{upstream_id}"


def backoff(failures: int) -> float:
    """The delay before reconnection number ``failures`` (1, 2, ...): doubling, capped, with jitter."""
    cap = float(settings.MCP_UPSTREAM_WATCH_BACKOFF_SECONDS)
    delay = min(FIRST_BACKOFF_SECONDS * 2 ** max(failures - 1, 0), cap)
    # Jitter: processes that lost the same upstream at once do not come back at once.
    return delay * random.uniform(0.5, 1.0)


def _announces_changes(capabilities: Any, kinds: tuple[str, ...] = WATCHED_KINDS) -> bool:
    """Unknown capabilities (never synced) are worth one look; known ones must announce a watched kind."""
    if not isinstance(capabilities, dict) or not capabilities:
        return True
    return any(
        isinstance(capabilities.get(kind), dict) and capabilities[kind].get("listChanged") for kind in kinds
    )


# What the watch's connection is made of, and what it listens for: an edit of any reconnects it.
CONNECTION_FIELDS = (
    "url", "mode", "transport", "secret_headers", "oauth_client_id", "oauth_token_url", "oauth_scope",
    "oauth_client_secret", "timeout_seconds", "publish_prompts", "publish_resources"
)  # fmt: skip


def candidates() -> dict[int, tuple[int, str]]:
    """Every enabled upstream worth watching, in every tenant: id -> (tenant id, connection fingerprint).

    The fingerprint changes with what the connection is made of (URL, mode, credentials, timeout): an
    owner's edit reconnects the watch.
    """
    with wall.bypass("upstream watch: which upstreams to listen to"):
        rows = Upstream.objects.filter(enabled=True).values_list(
            "pk", "tenant_id", "last_capabilities", *CONNECTION_FIELDS
        )
        return {
            pk: (tenant_id, hashlib.sha256(repr(connection).encode()).hexdigest())
            for pk, tenant_id, caps, *connection in rows
            if _announces_changes(caps, watched_kinds(*connection[-2:]))
        }


def _target(upstream_id: int, tenant_id: int) -> tuple[federation.Target, tuple[str, ...]] | None:
    with wall.tenant(tenant_id):
        row = Upstream.objects.filter(pk=upstream_id, enabled=True).first()
        if row is None:
            return None
        return service.target(row), watched_kinds(row.publish_prompts, row.publish_resources)


def sync_upstream(upstream_id: int, tenant_id: int) -> service.SyncReport | None:
    """One sync of the upstream through the service (None: gone, disabled, or unreachable: recorded)."""
    with wall.tenant(tenant_id):
        row = Upstream.objects.filter(pk=upstream_id, enabled=True).first()
        if row is None:
            return None
        try:
            return service.sync(row)
        except federation.UpstreamError as exc:
            # service.discover wrote it on the row (last_error), where the admin shows it.
            logger.info("upstream %s: sync after a change failed: %s", upstream_id, exc.message)
            return None


class Watch:
    """Listening to one upstream whose lease this process holds; `task` ends when the watch does."""

    def __init__(self, upstream_id: int, tenant_id: int, fingerprint: str, lease: Lease) -> None:
        self.upstream_id = upstream_id
        self.tenant_id = tenant_id
        self.fingerprint = fingerprint
        self.lease = lease
        # What tests and logs read: connections tried, the ones that failed in a row, syncs run.
        self.connects = 0
        self.failures = 0
        self.syncs = 0
        self.listening = asyncio.Event()
        self._dirty = asyncio.Event()
        self._synced = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"upstream-watch-{upstream_id}")

    def changed(self, kind: str = "tools") -> None:
        """A list changed upstream (or we may have missed one): sync after the debounce window."""
        self._dirty.set()

    def _ready(self, kinds: list[str]) -> None:
        self.listening.set()
        self.changed()

    async def synced(self, count: int, timeout: float) -> bool:
        """Wait until at least ``count`` syncs ran (tests); False if not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.syncs < count:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._synced.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._synced.wait()
        return True

    async def _run(self) -> None:
        helpers = [
            asyncio.get_running_loop().create_task(self._keep_lease()),
            asyncio.get_running_loop().create_task(self._sync_when_dirty()),
        ]
        try:
            while True:
                self.connects += 1
                began = time.monotonic()
                try:
                    # Read anew each time: an owner may have fixed the URL or the credentials meanwhile.
                    found = await database_sync_to_async(_target)(self.upstream_id, self.tenant_id)
                    if found is None:
                        return  # disabled or deleted since the rescan
                    target, kinds = found
                    await change_stream.watch(
                        target,
                        self.changed,
                        kinds=kinds,
                        ping_seconds=float(settings.MCP_UPSTREAM_WATCH_PING_SECONDS),
                        on_ready=self._ready,
                    )
                    self.failures = 0  # a graceful close (the upstream shuts down): listen again soon
                except change_stream.NothingToWatch:
                    # One sync records its capabilities, so the next rescans pass it over.
                    await self._sync()
                    return
                except federation.UpstreamError as exc:
                    listened = self.listening.is_set() and time.monotonic() - began >= STABLE_SECONDS
                    self.failures = 1 if listened else self.failures + 1
                    (logger.warning if self.failures == 1 else logger.debug)(
                        "upstream %s: listening for changes failed (%s in a row): %s",
                        self.upstream_id,
                        self.failures,
                        exc.message,
                    )
                self.listening.clear()
                await asyncio.sleep(backoff(max(self.failures, 1)))
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.lease.release()

    async def _keep_lease(self) -> None:
        every = float(settings.MCP_UPSTREAM_WATCH_LEASE_SECONDS) / 3
        while True:
            await asyncio.sleep(every)
            try:
                held = await self.lease.renew()
            except Exception as exc:  # noqa: BLE001 - Redis away: keep watching, try again next time
                logger.warning("upstream %s: could not renew the watch lease: %r", self.upstream_id, exc)
                continue
            if not held:
                logger.info("upstream %s: another process watches it now", self.upstream_id)
                self.task.cancel()
                return

    async def _sync_when_dirty(self) -> None:
        window = int(settings.MCP_UPSTREAM_WATCH_DEBOUNCE_MS) / 1000
        while True:
            await self._dirty.wait()
            await asyncio.sleep(window)
            # Cleared before the sync: a change announced while it runs gets a sync of its own.
            self._dirty.clear()
            await self._sync()

    async def _sync(self) -> None:
        try:
            # A sync may publish thousands of tools: in a process of its own (AMB-277).
            await database_sync_to_async(run_apart, thread_sensitive=False)(
                sync_upstream, self.upstream_id, self.tenant_id
            )
        except Exception:
            logger.exception("upstream %s: sync after a change failed", self.upstream_id)
        finally:
            self.syncs += 1
            self._synced.set()


class Watcher:
    """This process's watches: which upstreams it listens to, rescanned, bounded, stopped cleanly."""

    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.watches: dict[int, Watch] = {}
        self._task: asyncio.Task | None = None
        self.scanned = asyncio.Event()

    def start(self) -> None:
        """Start rescanning on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-watcher")

    async def _run(self) -> None:
        while True:
            try:
                await self.rescan()
            except Exception:
                logger.exception("upstream watcher: rescan failed; next one in a while")
            self.scanned.set()
            await asyncio.sleep(float(settings.MCP_UPSTREAM_WATCH_RESCAN_SECONDS))

    async def rescan(self) -> None:
        """Drop the watches that ended, are no longer wanted or were edited; take leases up to the cap."""
        wanted = await database_sync_to_async(candidates)()
        for upstream_id, watch in list(self.watches.items()):
            if watch.task.done() or wanted.get(upstream_id, (0, ""))[1] != watch.fingerprint:
                # An edited upstream is dropped (its lease released) and taken again below, anew.
                await self._drop(upstream_id)
        cap = int(settings.MCP_UPSTREAM_WATCH_MAX)
        # Shuffled: processes below their cap spread the upstreams between them.
        order = [pk for pk in wanted if pk not in self.watches]
        random.shuffle(order)
        for upstream_id in order:
            if len(self.watches) >= cap:
                break
            lease = Lease(
                lease_name(upstream_id), self.holder, float(settings.MCP_UPSTREAM_WATCH_LEASE_SECONDS)
            )
            if await lease.take():
                tenant_id, fingerprint = wanted[upstream_id]
                self.watches[upstream_id] = Watch(upstream_id, tenant_id, fingerprint, lease)

    async def _drop(self, upstream_id: int) -> None:
        watch = self.watches.pop(upstream_id)
        watch.task.cancel()
        # Bounded: a watch whose stream swallows the cancellation (seen once in CI, a test's watch
        # connected to whatever had taken its port meanwhile) must not hold up every other watch's
        # rescan; it is left to end on its own.
        done, _ = await asyncio.wait({watch.task}, timeout=DROP_SECONDS)
        if not done:
            logger.warning("upstream %s: its watch did not stop within %s s; left to end on its own",
                           upstream_id, DROP_SECONDS)  # fmt: skip

    async def stop(self) -> None:
        """Stop rescanning and every watch; their leases are released, so another process takes over."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for upstream_id in list(self.watches):
            await self._drop(upstream_id)


_process_watcher: Watcher | None = None


def start() -> Watcher | None:
    """Start this serving process's watcher on the running loop (once; off with MCP_UPSTREAM_WATCH=0)."""
    global _process_watcher
    if not settings.MCP_UPSTREAM_WATCH:
        return None
    if _process_watcher is None:
        _process_watcher = Watcher()
    _process_watcher.start()
    return _process_watcher


async def stop() -> None:
    """Stop this process's watcher (drain, shutdown): its leases go to the processes that stay."""
    global _process_watcher
    watcher, _process_watcher = _process_watcher, None
    if watcher is not None:
        await watcher.stop()
