"""Per-address limits of the authorization server's open endpoints (registration, token), per minute.

A moving window of the `limits` library (AMB-139): at most the limit in any 60 seconds per address
and endpoint. Counted in Redis when REDIS_URL is set, so every process shares one budget per
address; in process memory otherwise (one process). The address is the socket peer (behind a reverse
proxy run Daphne with --proxy-headers, or every client shares the proxy's budget); keys carry a
hash of it, not the address.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from limits import RateLimitItemPerMinute
from limits.storage import RedisStorage, Storage
from limits.strategies import MovingWindowRateLimiter

from lib.limits_memory import ThreadlessMemoryStorage
from mcp_app.infra import redis_client

KEY_PREFIX = "mcp:oauth:rate"
WINDOW_SECONDS = 60

_limiters: dict[str | None, MovingWindowRateLimiter] = {}  # by REDIS_URL (None: memory)


def _limiter() -> MovingWindowRateLimiter:
    """The limiter on REDIS_URL's Redis (our process pool), or on this process's memory without it."""
    url = settings.REDIS_URL
    found = _limiters.get(url)
    if found is None:
        storage: Storage = (
            RedisStorage(
                url, connection_pool=redis_client.sync_client().connection_pool, key_prefix=KEY_PREFIX
            )
            if url
            else ThreadlessMemoryStorage()
        )
        found = _limiters[url] = MovingWindowRateLimiter(storage)
    return found


def client_address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def retry_after(endpoint: str, address: str, per_minute: int) -> int | None:
    """Count one request to `endpoint` from `address`; the seconds to wait when over `per_minute` (0: no limit)."""
    if not per_minute:
        return None
    limiter = _limiter()
    item = RateLimitItemPerMinute(per_minute)
    who = hashlib.sha256(address.encode()).hexdigest()[:32]
    if limiter.hit(item, endpoint, who):
        return None
    reset = limiter.get_window_stats(item, endpoint, who).reset_time
    # Whole seconds, at least 1 and never past one window (a clock step must not ask for more).
    return min(WINDOW_SECONDS, max(1, math.ceil(reset - time.time())))


def too_many(what: str, seconds: int) -> HttpResponse:
    response = JsonResponse(
        {
            "error": "too_many_requests",
            "error_description": f"Too many {what} from this address; retry in {seconds} s.",
        },
        status=429,
    )
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


def reset() -> None:
    """Forget the in-memory counts (tests; Redis's go with the cache tests' FLUSHDB)."""
    _limiters.clear()
