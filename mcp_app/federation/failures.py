"""The one error funnel: whatever the SDK or the wire raised, as the UpstreamError a caller may see."""

from __future__ import annotations

import logging
import ssl

import httpx2
import mcp_types as types
from django.conf import settings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_app.core import ssrf
from mcp_app.federation.errors import UpstreamError, UpstreamUnavailable
from mcp_app.federation.oauth import AuthRefused
from mcp_app.federation.target import Target
from mcp_app.federation.transport import CallState, EndpointRefused

logger = logging.getLogger(__name__)


def leaf(exc: BaseException) -> BaseException:
    """The first real failure inside the exception groups the SDK's task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tls_failed(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unavailable(target: Target, state: CallState, exc: BaseException) -> UpstreamUnavailable | None:
    """The unavailability ``exc`` (with what the wire saw) stands for, or None when the upstream answered."""
    exc = leaf(state.auth_error or state.stream_error or exc)
    if isinstance(exc, UpstreamUnavailable):
        return exc
    if isinstance(exc, AuthRefused):
        return UpstreamUnavailable(exc.message)
    if isinstance(exc, EndpointRefused):
        # Our own words (the origin named by scheme and host only): safe to show.
        return UpstreamUnavailable(f"Upstream {target.label} cannot be used over HTTP+SSE: {exc}.")
    errors = [s for s in state.statuses if s >= 400]
    status = errors[-1] if errors else None
    host = target.label
    if isinstance(exc, ssrf.SsrfRefused):
        # The guard words its refusals for the http kind's tools; the same rule, said of an upstream.
        reason = exc.message.replace("The tool's URL", "Its URL")
        return UpstreamUnavailable(f"Upstream {host} cannot be used: {reason}")
    if status in (401, 403):
        return UpstreamUnavailable(f"Upstream {host} refused our credentials (HTTP {status}).")
    if status is not None and status >= 500:
        return UpstreamUnavailable(f"Upstream {host} failed (HTTP {status}).")
    if _tls_failed(exc):
        return UpstreamUnavailable(f"The TLS handshake with upstream {host} failed.")
    if state.unreached or isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return UpstreamUnavailable(f"Could not connect to upstream {host}.")
    if isinstance(exc, httpx2.TransportError | OSError):
        return UpstreamUnavailable(f"The connection to upstream {host} failed.")
    if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
        return UpstreamUnavailable(f"The connection to upstream {host} was lost.")
    return None


def failure(target: Target, state: CallState, exc: BaseException) -> UpstreamError:
    """Map anything an exchange raised to the error the caller sees (never the exception's own text)."""
    exc = leaf(state.auth_error or state.stream_error or exc)
    if isinstance(exc, UpstreamError):
        return exc
    if state.flooded is not None:
        burst, per_second = state.flooded
        return UpstreamError(
            f"Upstream {target.label} sent this call more than {burst:g} messages at once (then "
            f"{per_second:g} a second); the call was ended. Calls to it pause for "
            f"{settings.MCP_UPSTREAM_BREAKER_SECONDS} s."
        )
    if state.too_large is not None:
        return UpstreamError(
            f"Upstream {target.label} sent a message larger than {state.too_large} bytes; it was not read."
        )
    found = unavailable(target, state, exc)
    if found is not None:
        return found
    if isinstance(exc, MCPError):
        text = exc.error.message[:500]
        return UpstreamError(f"Upstream {target.label} answered with an error: {text}", code=exc.code)
    if isinstance(exc, ValidationError):
        return UpstreamError(f"Upstream {target.label} sent a reply that is not valid MCP.")
    # The exception's text may quote a request, and a request carries the headers: its type only.
    logger.warning("upstream %s of tenant %s: %s", target.upstream_id, target.tenant_id, type(exc).__name__)
    return UpstreamError(f"The exchange with upstream {target.label} failed.")
