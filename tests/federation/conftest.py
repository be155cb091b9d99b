"""Federation tests run against the real upstream servers of tests/upstreams, on 127.0.0.1 (allow-listed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_app import federation
from mcp_app.federation import breaker, call_stats
from tests.upstreams.conftest import (  # noqa: F401
    era,
    legacy_upstream,
    modern_upstream,
    sse_upstream,
    start_upstream,
    upstream,
)


@pytest.fixture(autouse=True)
async def _federation(settings) -> AsyncIterator[None]:
    # Loopback is refused by the SSRF guard unless allow-listed, as for the http kind's tests.
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    breaker.reset()
    call_stats.reset()
    yield
    await federation.close_all()
    breaker.reset()
    call_stats.reset()
