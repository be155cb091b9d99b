"""Notifications a handler sends while it works: log messages and progress.

They live in `mcp_app.core.notifications`, below the handler kinds that send them too (the http
kind relays an endpoint's events); the protocol's modules and the python callables import them here.
"""

from __future__ import annotations

from mcp_app.core.notifications import (
    DEFAULT_LOG_LEVEL,
    LOG_LEVELS,
    log,
    log_enabled,
    log_threshold,
    progress,
)

__all__ = ["DEFAULT_LOG_LEVEL", "LOG_LEVELS", "log", "log_enabled", "log_threshold", "progress"]
