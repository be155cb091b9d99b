"""The `limits` library's in-memory storage without a thread per call.

`limits.storage.MemoryStorage` prunes expired windows on a `threading.Timer` of 10 ms that it starts
again on every hit once the last one has ended: a new thread for nearly every tool call, started on
the serving loop, which waits until the thread runs. Beside a thread that holds the GIL (a tenant's
big list being filtered, AMB-353) that wait took 100-300 ms of everyone's requests. Here the pruning
runs in the caller's thread at most once a second; a window's answer never depended on it (the moving
window reads its own entries' times), only the memory did.
"""

from __future__ import annotations

import threading
import time

from limits.storage import MemoryStorage

PRUNE_SECONDS = 1.0


class ThreadlessMemoryStorage(MemoryStorage):
    def __init__(self) -> None:
        super().__init__()  # starts the library's first timer, once
        self._pruned = time.monotonic()
        self._pruning = threading.Lock()

    def _MemoryStorage__schedule_expiry(self) -> None:  # noqa: N802 - the name MemoryStorage calls
        now = time.monotonic()
        if now - self._pruned < PRUNE_SECONDS or not self._pruning.acquire(blocking=False):
            return
        try:
            self._pruned = now
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]
        finally:
            self._pruning.release()
