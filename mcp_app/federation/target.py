"""Which upstream to call and how (`Target`), and what it offers (`Offering`)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MODES = ("auto", "legacy")
# How the upstream is reached: Streamable HTTP, or the 2024-11-05 HTTP+SSE transport (a GET stream for
# the server's messages, POSTs to the endpoint it announces on it).
STREAMABLE_HTTP = "streamable-http"
SSE = "sse"
TRANSPORTS = (STREAMABLE_HTTP, SSE)


@dataclass(frozen=True)
class ClientCredentials:
    """A tenant's OAuth client of an upstream's authorization server (the secret kept out of repr)."""

    client_id: str
    client_secret: str = field(repr=False)
    token_url: str = ""
    scope: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(
            json.dumps([self.client_id, self.client_secret, self.token_url, self.scope]).encode()
        ).hexdigest()


@dataclass(frozen=True)
class Target:
    """One upstream as one caller reaches it.

    ``headers`` are the decrypted auth headers: kept out of ``repr`` (a traceback or a log line that
    prints a Target shows no secret) and never logged. ``identity`` is the caller for per-user
    auth; with the rest it keys the pooled session, so two users never share one.
    """

    tenant_id: int
    upstream_id: int
    url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    timeout_seconds: float = 30.0
    mode: str = "auto"
    identity: str = ""
    transport: str = STREAMABLE_HTTP
    # The upstream's own OAuth client (AMB-198): its tokens go on every request, beside ``headers``.
    oauth: ClientCredentials | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {self.transport!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")

    @functools.cached_property
    def pool_key(self) -> tuple[Any, ...]:
        """Sessions are shared only by calls with this key: same tenant, upstream, caller, URL, transport, credentials."""
        # The headers enter as a digest: the key may be printed in a debugger, the secret should not.
        digest = hashlib.sha256(repr(self.headers).encode()).hexdigest()
        if self.oauth is not None:
            digest += self.oauth.digest
        return (self.tenant_id, self.upstream_id, self.identity, self.url, self.transport, self.mode, digest)

    @property
    def upstream_key(self) -> tuple[int, int]:
        """The upstream itself, whoever calls it: what the breaker and the pool's bound count."""
        return (self.tenant_id, self.upstream_id)

    @property
    def label(self) -> str:
        """How messages name the upstream: its URL's host (no path, query or credentials)."""
        return _host_of(self.url)


def _host_of(url: str) -> str:
    rest = url.split("//", 1)[-1]
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return authority.rpartition("@")[2] or "upstream"


@dataclass(frozen=True)
class Offering:
    """What an upstream offers right now, as wire-shaped dicts."""

    protocol_version: str
    server_info: dict[str, Any]
    capabilities: dict[str, Any]
    instructions: str
    tools: list[dict[str, Any]]
    prompts: list[dict[str, Any]]
    resources: list[dict[str, Any]]
    resource_templates: list[dict[str, Any]]
