"""What a call to an upstream MCP server can fail with: messages safe for a client and an owner."""

from __future__ import annotations


class UpstreamError(Exception):
    """The upstream could not give a result; ``message`` names the upstream, never a secret or internals.

    ``code`` is the upstream's JSON-RPC error code when it answered with one (None otherwise).
    """

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class UpstreamUnavailable(UpstreamError):
    """The upstream cannot be reached: connect failed, refused our credentials, failed, or the breaker is open.

    ``retry_after`` (seconds) is set when we know when trying again makes sense.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamBusy(UpstreamUnavailable):
    """Every connection this process may keep to the upstream is busy (not a failure of the upstream)."""
