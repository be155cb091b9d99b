"""Which workers take background jobs: each worker's main process keeps its name in Redis (AMB-113).

A sorted set per queue, `mcp:workers:<queue>`, whose members are node names scored by when their
presence runs out (BEAT_SECONDS * 3 ahead, renewed every BEAT_SECONDS). A reader counts the members
not yet run out: one round trip, against a broadcast ping that waits its whole timeout when nobody
answers and counts a worker of any queue. A warm shutdown removes the name at once; a killed worker's
runs out within TTL_SECONDS. Clocks: the worker's and the reader's, kept equal by NTP as every expiry
across processes is (docs/operations.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from django.conf import settings

from mcp_app.infra import redis_client

logger = logging.getLogger(__name__)

BEAT_SECONDS = 5.0
TTL_SECONDS = 3 * BEAT_SECONDS

UP, DOWN, INLINE = "up", "down", "inline"


def key(queue: str) -> str:
    return f"mcp:workers:{queue}"


def beat(node: str, queues: Iterable[str]) -> None:
    """`node` takes jobs from `queues` for TTL_SECONDS more; members run out elsewhere are dropped."""
    now = time.time()
    with redis_client.sync_client().pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.zadd(key(queue), {node: now + TTL_SECONDS})
            pipe.zremrangebyscore(key(queue), "-inf", now)
            pipe.expire(key(queue), int(TTL_SECONDS) + 1)
        pipe.execute()


def leave(node: str, queues: Iterable[str]) -> None:
    """`node` takes no more jobs (a warm shutdown): readers stop counting it at once."""
    with redis_client.sync_client().pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.zrem(key(queue), node)
        pipe.execute()


def alive(queue: str | None = None) -> int:
    """How many workers take jobs from `queue` (MCP_BACKGROUND_QUEUE) now. Raises when Redis fails."""
    return int(
        redis_client.sync_client().zcount(key(queue or settings.MCP_BACKGROUND_QUEUE), time.time(), "+inf")
    )


async def aalive(queue: str | None = None) -> int:
    """`alive` from a coroutine. Raises when Redis fails."""
    queue = queue or settings.MCP_BACKGROUND_QUEUE
    return int(await redis_client.client().zcount(key(queue), time.time(), "+inf"))


class Beater:
    """The worker main process's presence: a daemon thread beating every BEAT_SECONDS until `stop`."""

    def __init__(self, node: str, queues: list[str]) -> None:
        self.node, self.queues = node, queues
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-worker-presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                beat(self.node, self.queues)
            except Exception:  # noqa: BLE001 - Redis away: readers see the worker gone, jobs are unaffected
                logger.warning("could not renew the presence of worker %s", self.node, exc_info=True)
            self._stopped.wait(BEAT_SECONDS)

    def stop(self) -> None:
        self._stopped.set()
        try:
            leave(self.node, self.queues)
        except Exception:  # noqa: BLE001 - it runs out by itself within TTL_SECONDS
            logger.warning("could not remove the presence of worker %s", self.node, exc_info=True)
