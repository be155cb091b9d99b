"""Polling: a legacy long answer's SSE stream closed after the tenant's `stream_poll_seconds` (AMB-128..131).

2025-11-25 lets a server close a request's stream before its response, after an event with an id,
telling the client with `retry` how long to wait before it resumes with GET + Last-Event-ID. The
close is a client disconnect as far as the call goes (exchange.detach): the run goes on and its
events are stored, so the resume (session_streams.resume_post_stream) replays them once. Older
revisions say the server SHOULD NOT close a request's stream early: theirs stay open.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from mcp_app.core.types import TenantInfo
from mcp_app.core.versions import SUPPORTED_VERSIONS, V2025_11_25

logger = logging.getLogger(__name__)


def applies(tenant: TenantInfo | None, version: str) -> bool:
    """Whether a request stream of a session negotiated at `version` is closed for polling."""
    legacy = version in SUPPORTED_VERSIONS  # 2026-07-28 answers carry no event ids to resume from
    return bool(tenant is not None and tenant.stream_poll_seconds and legacy and version >= V2025_11_25)


def deadline(tenant: TenantInfo | None, version: str) -> float | None:
    """When (time.monotonic) a stream opened now is closed for polling; None: it stays open."""
    if tenant is None or not applies(tenant, version):
        return None
    return time.monotonic() + tenant.stream_poll_seconds


def retry_ms(tenant: TenantInfo | None, version: str) -> int:
    """The `retry` a request stream's client is told: the tenant's when it polls, else the operator's."""
    if tenant is not None and applies(tenant, version):
        return tenant.stream_poll_retry_ms
    return settings.MCP_SSE_RETRY_MS


def closed(stream_id: str, after_event: str | None) -> None:
    """Log one close for polling (the client resumes after `after_event`)."""
    logger.info("stream %s closed for polling after event %s", stream_id, after_event)
