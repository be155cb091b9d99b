"""Cursor pagination for the list methods (PG-01..06).

A cursor names the key of the last item sent (tool name, resource URI, ...), not an offset, so a
definition added or removed between pages neither repeats nor skips the others (PG-04). It is
signed and bound to the tenant and the list, so a forged cursor, or one taken from another
tenant's or another list's answer, is an invalid cursor (-32602, PG-05).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.conf import settings
from django.core import signing

from mcp_app.core.context import RequestContext
from mcp_app.protocol.jsonrpc import InvalidParams

T = TypeVar("T")

MAX_CURSOR_LENGTH = 1024


def _salt(ctx: RequestContext, kind: str) -> str:
    return f"mcp.cursor.{ctx.tenant.id}.{kind}"


def encode_cursor(ctx: RequestContext, kind: str, last_key: str) -> str:
    """Return an opaque cursor that resumes `kind` after `last_key`."""
    return signing.dumps(last_key, salt=_salt(ctx, kind), compress=True)


def decode_cursor(ctx: RequestContext, kind: str, cursor: object) -> str:
    """Return the key a cursor resumes after; raise InvalidParams for anything we did not issue."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise InvalidParams("Invalid cursor.")
    try:
        key = signing.loads(cursor, salt=_salt(ctx, kind))
    except signing.BadSignature:
        raise InvalidParams("Invalid cursor.") from None
    if not isinstance(key, str):
        raise InvalidParams("Invalid cursor.")
    return key


def paginate(
    ctx: RequestContext,
    params: dict[str, Any],
    kind: str,
    items: Sequence[T],
    key: Callable[[T], str],
    page_size: int | None = None,
) -> tuple[list[T], str | None]:
    """Return one page of `items` (sorted by `key`) and the next cursor, None on the last page (PG-02)."""
    size = page_size or settings.MCP_PAGE_SIZE
    start = 0
    cursor = params.get("cursor")
    if cursor is not None:
        after = decode_cursor(ctx, kind, cursor)
        # The items are sorted by key: a binary search finds the resume point, so a page costs the
        # same in a list of 10 as in a list of 10,000.
        start = bisect.bisect_right(items, after, key=key)
    page = list(items[start : start + size])
    next_cursor = encode_cursor(ctx, kind, key(page[-1])) if len(items) > start + size else None
    return page, next_cursor


def with_cursor(result: dict[str, Any], next_cursor: str | None) -> dict[str, Any]:
    """Add nextCursor only when there is a next page: it is omitted, never null, on the last one."""
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
