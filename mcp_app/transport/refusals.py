"""The streams' caps answered over HTTP: 429 with Retry-After before anything of a stream is sent.

streams/ counts sessions and open streams and raises SessionsRefused or StreamCapReached past a cap;
here that becomes the answer a client reads: a JSON-RPC error body naming the limit (AMB-87,
AMB-100..103), or plain words on the 2024-11-05 /sse stream, whose client reads no JSON-RPC error there.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp_app.core.types import TenantInfo
from mcp_app.protocol.jsonrpc import RequestId
from mcp_app.protocol.ratelimit import RATE_LIMITED
from mcp_app.streams import sessions, stream_slots
from mcp_app.streams.session_admission import SessionsRefused
from mcp_app.streams.stream_slots import RETRY_SECONDS, Slot, StreamCapReached
from mcp_app.transport.wire import HttpError


def _too_many(
    message: str, retry_after: int, data: dict[str, Any], request_id: RequestId | None, json_rpc: bool
) -> HttpError:
    """429 + Retry-After, with a JSON-RPC error body (naming the limit) a client can read before any
    JSON-RPC answer; a plain one where no JSON-RPC body fits (json_rpc=False)."""
    return HttpError(
        429,
        message,
        code=RATE_LIMITED if json_rpc else None,
        request_id=request_id,
        headers=[(b"retry-after", str(retry_after).encode())],
        data={"retryAfter": retry_after, **data} if json_rpc else None,
    )


def too_many_streams(
    refused: StreamCapReached, request_id: RequestId | None = None, json_rpc: bool = True
) -> HttpError:
    return _too_many(
        refused.message,
        RETRY_SECONDS,
        {"limit": refused.limit, "streams": refused.scope},
        request_id,
        json_rpc,
    )


def too_many_sessions(
    refused: SessionsRefused, request_id: RequestId | None = None, json_rpc: bool = True
) -> HttpError:
    return _too_many(
        refused.message,
        refused.retry_after,
        {"limit": refused.limit, "sessions": refused.scope},
        request_id,
        json_rpc,
    )


async def admit_or_refuse(
    tenant: TenantInfo,
    session_id: str,
    owner: str,
    request_id: RequestId | None = None,
    *,
    json_rpc: bool = True,
) -> None:
    """sessions.admit, past a cap an HttpError 429."""
    try:
        await sessions.admit(tenant, session_id, owner)
    except SessionsRefused as refused:
        raise too_many_sessions(refused, request_id, json_rpc) from None


async def acquire_or_refuse(
    tenant: TenantInfo, session_id: str | None, request_id: RequestId | None = None, json_rpc: bool = True
) -> Slot | None:
    """stream_slots.acquire, past a cap an HttpError 429 (sent before anything of the stream)."""
    try:
        return await stream_slots.acquire(tenant, session_id)
    except StreamCapReached as refused:
        raise too_many_streams(refused, request_id, json_rpc) from None


@contextlib.asynccontextmanager
async def held(
    tenant: TenantInfo, session_id: str | None, request_id: RequestId | None = None
) -> AsyncIterator[None]:
    """Hold a stream slot for the body of the block, or refuse with 429 before anything is sent."""
    slot = await acquire_or_refuse(tenant, session_id, request_id)
    try:
        yield
    finally:
        await stream_slots.release(slot)
