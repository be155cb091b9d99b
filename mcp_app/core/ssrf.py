"""Decide whether an outbound call may connect to a URL, and to which IP address.

Every call out goes through here: the http and llm kinds (handlers/http.py) and upstream MCP servers
(federation/), so it sits in core, below both.

Policy: only ``http``/``https``; ``https`` unless the destination is allow-listed. The host is
resolved once (getaddrinfo in a thread) and EVERY address it resolves to must be public: loopback,
private, link-local, multicast, reserved, unspecified, carrier-grade NAT (100.64/10), benchmarking,
documentation ranges, cloud metadata endpoints, and IPv6 forms that embed such an IPv4 address
(IPv4-mapped, NAT64, 6to4, Teredo) are refused, unless ``settings.MCP_HTTP_HANDLER_ALLOW`` (hostnames,
IPs or CIDRs) admits the host or the address. The caller then connects to the vetted IP itself
(``Target.ip``), so a second DNS answer (rebinding) cannot change the address after the check.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from mcp_app.core.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
METADATA_IPS = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
# Not "global" by the IANA registries but not always flagged by ipaddress helpers either.
_EXTRA_BLOCKED: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "100.64.0.0/10",
        "192.0.0.0/24",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "ff00::/8",
        "64:ff9b:1::/48",
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class SsrfRefused(ToolError):
    """The destination is not one the http handler may reach."""


@dataclass(frozen=True)
class Target:
    """A vetted destination: connect to ``ip``, present ``host`` (Host header and TLS SNI)."""

    scheme: str
    host: str
    port: int
    ip: str
    allow_listed: bool


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def blocked_reason(ip: IPAddress) -> str | None:
    """Return why ``ip`` must not be reached (None when it is a public address)."""
    if ip in METADATA_IPS:
        return "a cloud metadata address"
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        reason = blocked_reason(embedded)
        return f"an IPv6 form of {reason}" if reason else None
    for label, flag in (
        ("an unspecified address", ip.is_unspecified),
        ("a loopback address", ip.is_loopback),
        ("a link-local address", ip.is_link_local),
        ("a multicast address", ip.is_multicast),
        ("a private address", ip.is_private),
        ("a reserved address", ip.is_reserved),
    ):
        if flag:
            return label
    if any(ip in net for net in _EXTRA_BLOCKED if net.version == ip.version):
        return "a reserved address"
    if not ip.is_global:
        return "a non-public address"
    return None


def _allow_entries() -> tuple[set[str], list[IPNetwork]]:
    hosts: set[str] = set()
    nets: list[IPNetwork] = []
    for entry in settings.MCP_HTTP_HANDLER_ALLOW:
        entry = entry.strip().lower()
        if not entry:
            continue
        try:
            nets.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            hosts.add(entry.rstrip("."))
    return hosts, nets


def host_allow_listed(host: str) -> bool:
    """Return True when the hostname itself is on the allow-list."""
    hosts, _ = _allow_entries()
    return host.lower().rstrip(".") in hosts


def ip_allow_listed(ip: IPAddress) -> bool:
    """Return True when ``ip`` (or the IPv4 address it embeds) is inside an allow-listed IP or CIDR."""
    _, nets = _allow_entries()
    candidates = [ip]
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        candidates.append(embedded)
    return any(c in net for c in candidates for net in nets if net.version == c.version)


def split_url(url: str) -> tuple[str, str, int]:
    """Return (scheme, host, port) of an http(s) URL; SsrfRefused when it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise SsrfRefused("The tool's URL is not a valid URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise SsrfRefused("The tool's URL must use http or https.")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise SsrfRefused("The tool's URL has no host.")
    if parts.username or parts.password:
        raise SsrfRefused("The tool's URL must not contain credentials; use secret headers.")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        raise SsrfRefused(f"The host {host!r} could not be resolved.") from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise SsrfRefused(f"The host {host!r} could not be resolved.")
    return addresses


async def vet_url(url: str) -> Target:
    """Resolve and check ``url``; return the pinned Target or raise SsrfRefused."""
    scheme, host, port = split_url(url)
    host_listed = host_allow_listed(host)
    if host.lower() in METADATA_HOSTS and not host_listed:
        raise SsrfRefused(f"The host {host!r} is a cloud metadata service; refused.")
    literal = _literal(host)
    addresses = [literal] if literal is not None else await _resolve(host, port)
    for ip in addresses:
        if host_listed or ip_allow_listed(ip):
            continue
        reason = blocked_reason(ip)
        if reason:
            # Name the host the tenant configured, not the address it resolved to.
            raise SsrfRefused(f"The host {host!r} resolves to {reason}; refused.")
    allow_listed = host_listed or all(ip_allow_listed(ip) for ip in addresses)
    if scheme != "https" and not allow_listed:
        raise SsrfRefused("The tool's URL must use https.")
    return Target(scheme=scheme, host=host, port=port, ip=str(addresses[0]), allow_listed=allow_listed)


def check_url_statically(url: str) -> None:
    """Raise SsrfRefused for URLs that can be refused without DNS (for the admin form)."""
    scheme, host, _port = split_url(url)
    listed = host_allow_listed(host)
    literal = _literal(host)
    if literal is not None:
        listed = listed or ip_allow_listed(literal)
        reason = None if listed else blocked_reason(literal)
        if reason:
            raise SsrfRefused(f"The URL points to {reason}; refused.")
    if host.lower() in METADATA_HOSTS and not listed:
        raise SsrfRefused(f"The host {host!r} is a cloud metadata service; refused.")
    if scheme != "https" and not listed:
        raise SsrfRefused("The tool's URL must use https.")
