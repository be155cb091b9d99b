"""Kept tool results: a call answered from a result of the same tool, arguments and caller (AMB-374).

Opt-in per tool (`result_cache_seconds`), only for tools marked readOnlyHint and idempotentHint that
run in the server process and ask nothing (definitions/checks.py). The key holds the tenant, its
definitions version (a publish, a sync or a policy change is a new version: nothing kept before it is
found again), the tool, the caller's authorization context and the arguments. The caller's context is
its identity (governance/audit.identity_key: an API key, a subject, a user, a client, else the
address) with its OAuth client and scopes; only the owner's `result_cache_shared` puts every caller
under one key. What a result or its upstream says of itself (`cacheScope: public`) is never read.

What is kept is what the caller was answered: after the decision, the guardrails on arguments and
on results. The decision still runs on every call (a denied caller never reaches a kept result), and
so do quotas (a kept answer is a call). Errors are never kept.

Stored in Redis when REDIS_URL is set (every process answers from one store), in this process's
memory otherwise, bounded either way by MCP_RESULT_CACHE_TENANT_BYTES a tenant: in Redis a tenant's
stored bytes are counted, and a store past the bound is skipped until the count expires with the
longest-lived entry it counted (so the live entries never exceed it); in memory each tenant's entries
are an LRU of that many bytes.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from cachetools import LRUCache
from django.conf import settings

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, ToolDef
from mcp_app.governance.audit import identity_key
from mcp_app.infra import redis_client

KEY_PREFIX = "mcp:rc:"

# Store one entry and count its bytes unless the tenant's count would pass its bound; the count lives
# as long as the longest entry it counted. KEYS: entry, count. ARGV: value, seconds, bound. 1 if stored.
_STORE = """
local size = string.len(ARGV[1])
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if used + size > tonumber(ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('INCRBY', KEYS[2], size)
if redis.call('TTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('EXPIRE', KEYS[2], ARGV[2]) end
return 1
"""

_lock = threading.Lock()
# In memory (no Redis): per tenant, an LRU of (expires at, JSON) weighed in bytes.
_memory: LRUCache[int, LRUCache[str, tuple[float, str]]] = LRUCache(settings.MCP_CATALOG_TENANTS)


def _weigh(entry: tuple[float, str]) -> int:
    return len(entry[1].encode())


def applies(ctx: RequestContext, tool: ToolDef) -> bool:
    """Whether this call may be answered from, and kept in, the cache: the tool opted in, and the call
    is the published tool's own (a draft's Try never is)."""
    return tool.result_cache_seconds > 0 and ctx.draft_tool is None


def caller(ctx: RequestContext) -> str:
    """The caller's authorization context: results never cross it."""
    scopes = ",".join(sorted(ctx.scopes)) if ctx.scopes is not None else "-"
    return f"{identity_key(ctx)}|{ctx.client_id or '-'}|{scopes}"


def key(ctx: RequestContext, catalog: Catalog, tool: ToolDef, arguments: dict[str, Any]) -> str:
    whom = "*" if tool.result_cache_shared else caller(ctx)
    material = json.dumps(
        [catalog.version, tool.name, whom, arguments],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return f"{KEY_PREFIX}{ctx.tenant.id}:{hashlib.sha256(material.encode()).hexdigest()}"


def _count_key(tenant_id: int) -> str:
    return f"{KEY_PREFIX}{tenant_id}:bytes"


async def get(
    ctx: RequestContext, catalog: Catalog, tool: ToolDef, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    """The kept result of this call, or None."""
    found = key(ctx, catalog, tool, arguments)
    if redis_client.enabled():
        try:
            raw = await redis_client.client().get(found)
        except redis_client.UNAVAILABLE:
            return None  # the tool runs instead
    else:
        with _lock:
            tenant = _memory.get(ctx.tenant.id)
            entry = tenant.get(found) if tenant is not None else None
        raw = entry[1] if entry is not None and entry[0] > time.monotonic() else None
    if raw is None:
        return None
    result: dict[str, Any] = json.loads(raw)
    return result


async def put(
    ctx: RequestContext, catalog: Catalog, tool: ToolDef, arguments: dict[str, Any], result: dict[str, Any]
) -> bool:
    """Keep a result (never an error result, never one larger than a tenant's bound); whether it was."""
    if result.get("isError"):
        return False
    raw = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    bound = settings.MCP_RESULT_CACHE_TENANT_BYTES
    if len(raw.encode()) > bound:
        return False
    found = key(ctx, catalog, tool, arguments)
    seconds = tool.result_cache_seconds
    if redis_client.enabled():
        try:
            stored = await redis_client.client().eval(
                _STORE, 2, found, _count_key(ctx.tenant.id), raw, seconds, bound
            )
        except redis_client.UNAVAILABLE:
            return False
        return bool(stored)
    with _lock:
        tenant = _memory.get(ctx.tenant.id)
        if tenant is None:
            tenant = _memory[ctx.tenant.id] = LRUCache(bound, getsizeof=_weigh)
        tenant[found] = (time.monotonic() + seconds, raw)
    return True


def forget() -> None:
    """Drop what this process keeps in memory (tests)."""
    with _lock:
        _memory.clear()
