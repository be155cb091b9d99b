"""A registry's server.json as what the upstream form needs (AMB-373): one proposal per remote.

A remote is a URL and a transport the platform speaks (``streamable-http``, ``sse``); a server with only
packages (stdio, run on the person's machine) has none and cannot be an upstream. The headers a remote
declares become the secret headers the person is asked to enter (the platform keeps every upstream
header encrypted; a registry's own value is never taken as a secret: it may be a template of variables).
The URL is checked against the SSRF policy now, without DNS (``core.ssrf.check_url_statically``):
an entry pointing at an internal address says so and cannot be used; the full check, DNS included,
runs again whenever the upstream is reached (federation's client vets every connection).
Everything taken from the entry is bounded and checked here, since a registry is anyone's server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mcp_app.core import ssrf
from mcp_app.models.upstreams import UpstreamTransport

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
_NOT_NAME = re.compile(r"[^a-z0-9_-]+")
_VARIABLE = re.compile(r"\{[^{}]*\}")
TRANSPORTS = {t.value for t in UpstreamTransport}


@dataclass(frozen=True)
class Header:
    """A header the upstream needs: its name, what the registry says of it, whether it must be set."""

    name: str
    description: str = ""
    required: bool = False


@dataclass
class Remote:
    url: str
    transport: str
    headers: list[Header] = field(default_factory=list)
    # Why the platform will not use it ("" when it may): a refused address, variables left in the URL.
    refused: str = ""


@dataclass
class Proposal:
    """A registry entry, and each of its remotes as an upstream the form can be filled with."""

    server_name: str
    version: str
    title: str
    description: str
    upstream_name: str
    prefix: str
    remotes: list[Remote] = field(default_factory=list)


def _text(value: Any, limit: int) -> str:
    return " ".join(value.split())[:limit] if isinstance(value, str) else ""


def upstream_name(server_name: str) -> str:
    """A name the Upstream model takes, from the part after the slash (``io.github.acme/Weather-API`` → ``weather-api``)."""
    tail = server_name.rsplit("/", 1)[-1].lower()
    name = _NOT_NAME.sub("-", tail).strip("-_")[:63].rstrip("-_")
    return name or "upstream"


def _headers(raw: Any) -> list[Header]:
    headers = []
    for item in raw[:20] if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and _HEADER_NAME.match(item["name"]):
            headers.append(
                Header(item["name"], _text(item.get("description"), 300), item.get("isRequired") is True)
            )
    return headers


def _remote(raw: Any) -> Remote | None:
    if not isinstance(raw, dict) or raw.get("type") not in TRANSPORTS:
        return None
    url = raw.get("url")
    if not isinstance(url, str) or not url or len(url) > 2000:
        return None
    remote = Remote(url=url, transport=raw["type"], headers=_headers(raw.get("headers")))
    if _VARIABLE.search(url):
        remote.refused = "Its URL has variables to fill in ({…}); enter the URL yourself."
    else:
        try:
            ssrf.check_url_statically(url)
        except ssrf.SsrfRefused as exc:
            remote.refused = exc.message.replace("The tool's URL", "Its URL").replace("The URL", "Its URL")
    return remote


def propose(server: dict[str, Any]) -> Proposal:
    """What the upstream form is filled with from one server.json (``remotes`` empty: nothing to add)."""
    name = _text(server.get("name"), 200)
    upstream = upstream_name(name)
    remotes = server.get("remotes")
    return Proposal(
        server_name=name,
        version=_text(server.get("version"), 255),
        title=_text(server.get("title"), 100),
        description=_text(server.get("description"), 300),
        upstream_name=upstream,
        prefix=upstream.replace("-", "_")[:31] + "_",
        remotes=[r for r in map(_remote, remotes[:10] if isinstance(remotes, list) else []) if r is not None],
    )
