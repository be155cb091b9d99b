"""Canonical resource URIs of tenant MCP endpoints (RFC 8707 audiences) and their parsing."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit, urlunsplit

from django.conf import settings

MCP_PATH = "/t/{slug}/mcp"


def canonical_uri(slug: str) -> str:
    """The tenant endpoint's canonical URI: MCP_PUBLIC_URL + /t/<slug>/mcp, no trailing slash."""
    return normalize(settings.MCP_PUBLIC_URL + MCP_PATH.format(slug=slug)) or ""


def protected_resource_metadata_url(slug: str) -> str:
    """RFC 9728 §3.1: the well-known suffix inserted between the host and the resource's path."""
    base = urlsplit(settings.MCP_PUBLIC_URL)
    return urlunsplit(
        (
            base.scheme,
            base.netloc,
            "/.well-known/oauth-protected-resource" + MCP_PATH.format(slug=slug),
            "",
            "",
        )
    )


def issuer() -> str:
    """One authorization server for every tenant, at the site's origin (AMB-25)."""
    return normalize(settings.MCP_PUBLIC_URL) or settings.MCP_PUBLIC_URL


def normalize(uri: str) -> str | None:
    """Scheme and host lower-cased, default port dropped, no trailing slash; None when not a usable URI.

    A fragment makes the value invalid as a resource indicator (RFC 8707 §2), so it gives None.
    """
    if not isinstance(uri, str) or not uri or len(uri) > 2048:
        return None
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.fragment or "#" in uri:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}[scheme]
    netloc = host if port in (None, default) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    # A client's choice of tool discovery on the MCP URL (`?tools=search`, AMB-376) names the same
    # resource: a client that sends the URL it was given as its resource indicator gets a token for it.
    query = "" if parse_qs(parts.query).keys() == {"tools"} else parts.query
    return urlunsplit((scheme, netloc, path, query, ""))


def slug_for_resource(uri: str) -> str | None:
    """The tenant slug a resource URI names, or None when it is not one of our tenant endpoints."""
    value = normalize(uri)
    base = normalize(settings.MCP_PUBLIC_URL)
    if value is None or base is None or not value.startswith(base + "/t/"):
        return None
    rest = value[len(base) + len("/t/") :]
    slug, sep, tail = rest.partition("/")
    if not sep or tail != "mcp" or not slug:
        return None
    return slug
