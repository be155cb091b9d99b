"""Protocol revisions this server speaks, newest first, and the era each belongs to.

Legacy era (2024-11-05 .. 2025-11-25): an `initialize` handshake and optional sessions.
Modern era (2026-07-28): stateless; every request names its revision in `_meta`
(2026-07-28 basic/versioning). Both are served on the same endpoint, decided per request.
"""

from __future__ import annotations

V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"
V2026_07_28 = "2026-07-28"

# Legacy era: negotiated by initialize.
SUPPORTED_VERSIONS: tuple[str, ...] = (V2025_11_25, V2025_06_18, V2025_03_26, V2024_11_05)
LATEST = SUPPORTED_VERSIONS[0]
# Modern era: named by every request.
MODERN_VERSIONS: tuple[str, ...] = (V2026_07_28,)
LATEST_MODERN = MODERN_VERSIONS[0]
# Everything this endpoint serves, newest first (server/discover, UnsupportedProtocolVersion data).
ALL_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + SUPPORTED_VERSIONS
# Assumed when a request has neither a session nor an MCP-Protocol-Version header (HT-46).
DEFAULT_NEGOTIATED = V2025_03_26


def negotiate(requested: object) -> str:
    """Return the client's version when initialize may agree on it, else the newest legacy one (LC-04)."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST


def is_modern(version: str) -> bool:
    """True for a revision of the stateless era (no handshake, no sessions)."""
    return version >= V2026_07_28


def at_least(version: str, minimum: str) -> bool:
    """True when `version` is `minimum` or newer (dates compare lexically)."""
    return version >= minimum


# The `_meta` keys of the modern era's request envelope and results (2026-07-28 schema.ts).
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
