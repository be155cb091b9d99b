"""Per-address limits of the authorization server's open endpoints (registration, token), per minute.

Counted in the default cache: Redis when REDIS_URL is set, so every process shares one budget per
address; in process memory otherwise (one process). The address is the socket peer (behind a reverse
proxy run Daphne with --proxy-headers, or every client shares the proxy's budget).
"""

from __future__ import annotations

import hashlib
import time

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse

CACHE_PREFIX = "mcp:oauth:rate:"


def client_address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def retry_after(endpoint: str, address: str, per_minute: int) -> int | None:
    """Count one request to `endpoint` from `address`; the seconds to wait when over `per_minute` (0: no limit)."""
    if not per_minute:
        return None
    now = time.time()
    window = int(now // 60)
    key = f"{CACHE_PREFIX}{endpoint}:{hashlib.sha256(address.encode()).hexdigest()[:32]}:{window}"
    cache.add(key, 0, 61)
    try:
        count = cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, 61)
        count = 1
    if count <= per_minute:
        return None
    return max(1, 60 - int(now % 60))


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
