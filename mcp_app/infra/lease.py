"""A named lease one holder at a time keeps across the deployment: Redis `SET NX PX`, renewed by its holder.

Who holds it does the work (an upstream's watcher); a holder that dies stops renewing and the lease
lapses within its duration, so another process takes over. Renewal and release compare the holder
first (one script each), so a holder whose lease lapsed and was taken never renews or frees the
new holder's. Without Redis (one embedded process) the leases are this process's, in memory, with
the same rules, so two holders in one process still exclude each other.
"""

from __future__ import annotations

import time

from mcp_app.infra import redis_client

PREFIX = "mcp:lease:"

# KEYS[1] the lease, ARGV[1] the holder, ARGV[2] the duration in ms: 1 when still ours (renewed), else 0.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Without Redis: name -> (holder, when it lapses on the monotonic clock).
_local: dict[str, tuple[str, float]] = {}


class Lease:
    """The lease ``name`` as ``holder`` sees it; `take` and `renew` return whether it is held now."""

    def __init__(self, name: str, holder: str, seconds: float) -> None:
        self.key = PREFIX + name
        self.holder = holder
        self.ms = max(1, int(seconds * 1000))

    async def take(self) -> bool:
        """Take the lease if nobody holds it (or renew it if we do)."""
        if redis_client.enabled():
            client = redis_client.client()
            if await client.set(self.key, self.holder, nx=True, px=self.ms):
                return True
            return await self.renew()
        now = time.monotonic()
        found = _local.get(self.key)
        if found is None or found[1] <= now or found[0] == self.holder:
            _local[self.key] = (self.holder, now + self.ms / 1000)
            return True
        return False

    async def renew(self) -> bool:
        """Extend the lease if it is still ours; False once it lapsed (and perhaps went to another)."""
        if redis_client.enabled():
            return bool(await redis_client.client().eval(_RENEW, 1, self.key, self.holder, self.ms))
        now = time.monotonic()
        found = _local.get(self.key)
        if found is None or found[0] != self.holder or found[1] <= now:
            return False
        _local[self.key] = (self.holder, now + self.ms / 1000)
        return True

    async def release(self) -> None:
        """Give the lease up (if ours) so another holder need not wait for it to lapse."""
        if redis_client.enabled():
            await redis_client.client().eval(_RELEASE, 1, self.key, self.holder)
            return
        found = _local.get(self.key)
        if found is not None and found[0] == self.holder:
            del _local[self.key]

    async def holder_now(self) -> str | None:
        """Who holds the lease now (None: nobody); for tests and the admin."""
        if redis_client.enabled():
            return await redis_client.client().get(self.key)
        found = _local.get(self.key)
        return found[0] if found is not None and found[1] > time.monotonic() else None
