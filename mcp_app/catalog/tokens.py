"""Change tokens: one number per tenant that moves on every committed edit of its definitions.

With Redis the token is a shared counter (every process sees every edit); without, it is the
database's definitions_version as seen by this process, rechecked every few seconds and moved at
once by `move`, which the signals call after commit. A request reads each token at most once.

With Redis a request usually reads no token from Redis at all: `move` publishes the new value in the
same script that increments it, and every serving loop listens (infra/pubsub), so the tokens a
process has seen are kept current in memory, a change reaching every process within milliseconds.
A token is read from Redis only when the listener is not subscribed (it then knows nothing) or the
tenant is new to the process. A legacy request still pipelines the token with its session read
(consumer.prefetch), so it sees even an edit made a moment before, in the same round trip.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from mcp_app.infra import pubsub, redis_client
from tenants.models import Tenant

logger = logging.getLogger(__name__)

# Without Redis, re-read the version from the database this often, so that an edit made by another
# process (a management command, a shell) is picked up eventually; note_change makes it immediate.
LOCAL_RECHECK_SECONDS: float = settings.MCP_VERSION_RECHECK_SECONDS

# Entries are keyed by the change token observed *before* loading, and are valid while the token
# is unchanged (equality, not order). With Redis the token is a shared counter that every change
# increments after commit; it is unrelated to the database's definitions_version, so a restored or
# recreated database can never make a stale entry look current. Without Redis the token is the
# database's definitions_version itself, as seen by this process.
_local_versions: dict[int, tuple[int, float]] = {}  # tenant id -> (version, monotonic time checked)
# Tokens already read by the current request (None outside a request: every call reads).
_request_tokens: ContextVar[dict[int, int] | None] = ContextVar("mcp_request_tokens", default=None)

# A missing counter (new tenant, flushed Redis) starts at the current time in microseconds, far
# above any value an entry cached before the flush can hold; INCR then moves it on every change.
# The new value is published by the same script, so no process can see it before its listeners do.
# '%d': Lua's own number-to-string gives 1.7955807241581e+15 for a token that large.
_BUMP = """
if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
local token = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. string.format('%d', token))
return token
"""
CHANGES_CHANNEL = "mcp:tokens:changed"

# Tenant id -> the newest token this process has seen while subscribed (tokens only grow: a flushed
# counter restarts from the current time, above any value it held).
_pushed: dict[int, int] = {}


def _learn(tenant_id: int, token: int) -> None:
    known = _pushed.get(tenant_id)
    if known is None or token > known:
        _pushed[tenant_id] = token


def _on_change(raw: Any) -> None:
    try:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        tenant, token = (int(part) for part in text.split())
    except (TypeError, ValueError):
        # Never silent: a change this process cannot read leaves it serving old definitions.
        logger.error("unreadable change-token message %r; forgetting every pushed token", raw)
        _pushed.clear()
        return
    _learn(tenant, token)


_changes = pubsub.Subscriber(CHANGES_CHANNEL, _on_change, _pushed.clear, "change token")


def version_key(tenant_id: int) -> str:
    return f"mcp:tenant:{tenant_id}:token"


def _fresh_token() -> int:
    return time.time_ns() // 1000


# --- Redis clients -------------------------------------------------------------------------------


def _async_redis() -> Any:
    # Shared with the transport: one blocking pool per loop and URL (see infra.redis_client).
    return redis_client.client()


def _redis_sync() -> Any:
    return redis_client.sync_client()


# --- Change tokens --------------------------------------------------------------------------------


def db_version(tenant_id: int) -> int:
    """The tenant's definitions_version as the database holds it now."""
    version = Tenant.objects.filter(pk=tenant_id).values_list("definitions_version", flat=True).first()
    return int(version or 0)


def _remember_local(tenant_id: int, version: int) -> None:
    # Plain assignment: the database is the truth, even when it went backwards (recreated); an
    # out-of-order note_change is corrected by the next recheck, and it dropped the caches anyway.
    _local_versions[tenant_id] = (version, time.monotonic())


def begin_request() -> None:
    """Read each tenant's change token at most once for the rest of this request.

    The memo lives in a context variable, so the tasks the request starts (its dispatches) share
    it and other requests never see it. A request then works on the definitions as of its start;
    entries stay keyed by a token read before loading, so the next request sees any later edit.
    """
    _request_tokens.set({})


def pushed(tenant_id: int) -> bool:
    """Whether this process learns the tenant's token by push (subscribed, and told it): reading the
    token then costs no Redis round trip, so a request need not fetch it beside its session."""
    return _changes.live() and tenant_id in _pushed


def subscription_mark() -> int | None:
    """Taken before a token is read elsewhere (a pipelined GET), for remember_token: None unsubscribed."""
    return _changes.generation if _changes.live() else None


def remember_token(tenant_id: int, raw: Any, mark: int | None = None) -> bool:
    """Record a token read elsewhere (a pipelined GET) for this request; False if it is unusable.

    With the `subscription_mark` taken before the read, and the subscription up throughout, later
    moves arrive by push: the token is learned for good, as current_version learns the ones it reads.
    """
    try:
        token = int(raw)
    except (TypeError, ValueError):
        return False
    if mark is not None and _changes.live() and _changes.generation == mark:
        _learn(tenant_id, token)
    memo = _request_tokens.get()
    if memo is None:
        return False
    memo[tenant_id] = token
    return True


async def current_version(tenant_id: int) -> int:
    """Return the tenant's change token: entries cached under another token are stale."""
    memo = _request_tokens.get()
    if memo is not None and tenant_id in memo:
        return memo[tenant_id]
    if settings.REDIS_URL:
        if settings.MCP_CHANGE_TOKEN_SUBSCRIBER:
            _changes.ensure()
        generation = _changes.generation if _changes.live() else None
        if generation is not None and tenant_id in _pushed:
            token = _pushed[tenant_id]
            if memo is not None:
                memo[tenant_id] = token
            return token
        client = _async_redis()
        try:
            value = await client.get(version_key(tenant_id))
            if value is None:
                # First reader after a flush or for a new tenant: start the counter (NX: a
                # concurrent start or bump wins) and use whatever is stored now.
                await client.set(version_key(tenant_id), _fresh_token(), nx=True)
                value = await client.get(version_key(tenant_id))
            if generation is not None and _changes.live() and _changes.generation == generation:
                _learn(tenant_id, int(value))  # subscribed throughout: later moves arrive by push
            if memo is not None:
                memo[tenant_id] = int(value)
            return int(value)
        except Exception:
            # Without the shared token nothing can be trusted as current: report a value no
            # entry holds, so the caller reads the database.
            logger.warning("Redis unavailable; tenant %s is read from the database", tenant_id, exc_info=True)
            return -_fresh_token()
    entry = _local_versions.get(tenant_id)
    if entry is not None and time.monotonic() - entry[1] < LOCAL_RECHECK_SECONDS:
        return entry[0]
    version = await database_sync_to_async(db_version)(tenant_id)
    _remember_local(tenant_id, version)
    return version


def learn(tenant_id: int, token: Any) -> None:
    """Take a token that came with a change notification (the stream delivering it reads it first)."""
    if isinstance(token, int) and not isinstance(token, bool):
        _learn(tenant_id, token)


def move(tenant_id: int, version: int) -> int | None:
    """Record the tenant's new definitions_version here and move its shared token (after commit).

    Returns the new shared token (None without Redis, or when it could not be moved): the change
    notifications carry it, so whichever stream delivers one has the new definitions to serve.
    """
    _remember_local(tenant_id, version)
    if settings.REDIS_URL:
        try:
            token = int(
                _redis_sync().eval(
                    _BUMP,
                    1,
                    version_key(tenant_id),
                    _fresh_token(),
                    redis_client.channel(CHANGES_CHANNEL),
                    tenant_id,
                )
            )
            _learn(tenant_id, token)
            return token
        except Exception:  # the edit has committed; a failed publish must not break it
            logger.exception("could not move tenant %s change token in Redis", tenant_id)
    return None


def forget_local() -> None:
    """Forget the versions this process read (tests, and after a deployment-wide reset)."""
    _local_versions.clear()
    _pushed.clear()


async def stop_listening() -> None:
    """Stop this loop's change-token listener (tests: a loop must not close with it running)."""
    await _changes.stop()


async def listening(timeout: float = 5.0) -> bool:
    """Wait until this loop listens for token changes (Redis only)."""
    return await _changes.listening(timeout)
