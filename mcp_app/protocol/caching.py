"""Caching hints of 2026-07-28 results: `ttlMs` and `cacheScope` (server/utilities/caching).

Set per tenant in the admin. Automatic scope is `private` for an OAuth tenant, since what a caller
may see there depends on its token, and `public` for a public tenant, where it never does.
"""

from __future__ import annotations

from typing import Any

from mcp_app.core.context import RequestContext

# The methods whose complete results carry the hints (caching.mdx "Cacheable Results").
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)


def cache_scope(ctx: RequestContext) -> str:
    scope = ctx.tenant.cache_scope
    if scope in ("public", "private"):
        return scope
    return "public" if ctx.tenant.auth_mode == "public" else "private"


def hints(ctx: RequestContext) -> dict[str, Any]:
    """The same hints on every page of a list (caching.mdx: one scope for all pages)."""
    return {"ttlMs": max(0, int(ctx.tenant.cache_ttl_ms)), "cacheScope": cache_scope(ctx)}
