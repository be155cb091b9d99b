"""A token bucket: a burst at once, then so many a second (the relay's and the upstream budget's)."""

from __future__ import annotations

import time


class TokenBucket:
    def __init__(self, burst: float, per_second: float) -> None:
        self.burst, self.per_second = burst, per_second
        self.tokens, self.at = burst, time.monotonic()

    def take(self) -> bool:
        """Spend one token if there is one."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
