"""Protocol revisions this server speaks, newest first."""

from __future__ import annotations

V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"

# Legacy era (initialize handshake, optional sessions). 2026-07-28 comes with a later issue.
SUPPORTED_VERSIONS: tuple[str, ...] = (V2025_11_25, V2025_06_18, V2025_03_26, V2024_11_05)
LATEST = SUPPORTED_VERSIONS[0]
# Assumed when a request has neither a session nor an MCP-Protocol-Version header (HT-46).
DEFAULT_NEGOTIATED = V2025_03_26


def negotiate(requested: object) -> str:
    """Return the client's version when supported, else the newest we speak (LC-04)."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST


def at_least(version: str, minimum: str) -> bool:
    """True when `version` is `minimum` or newer (dates compare lexically)."""
    return version >= minimum
