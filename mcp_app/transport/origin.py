"""Host and Origin checks against DNS rebinding (HT-02, HT-54, AMB-10), and CORS headers for browsers."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from mcp_app.core.types import TenantInfo
from mcp_app.transport.wire import Headers, HttpError, Request

ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Accept, MCP-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
EXPOSE_HEADERS = "Mcp-Session-Id, WWW-Authenticate, MCP-Protocol-Version"
PREFLIGHT_MAX_AGE = "600"


def _public_origin() -> str:
    parts = urlsplit(settings.MCP_PUBLIC_URL)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _normalize(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def check_host(request: Request) -> None:
    """Refuse a Host outside ALLOWED_HOSTS with 400 (a rebound DNS name shows up here)."""
    host = request.header("host")
    if host is None:
        # Browsers always send Host; a request without one cannot come from a rebinding page.
        return
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        raise HttpError(400, f"Host {host!r} is not served here.", code=None)


def allowed_origin(request: Request, tenant: TenantInfo | None) -> str | None:
    """Return the request's Origin when present and allowed, None when absent; 403 when refused."""
    origin = request.header("origin")
    if origin is None:
        return None  # non-browser clients send no Origin
    normalized = _normalize(origin)
    host = request.header("host")
    own = {_public_origin()}
    if host:
        own.add(f"{request.scheme}://{host}".lower())
    if normalized in own or (tenant is not None and normalized in tenant.allowed_origins):
        return origin
    raise HttpError(403, f"Origin {origin!r} is not allowed to call this MCP endpoint.")


def cors_headers(origin: str | None) -> Headers:
    """CORS answer headers for an allowed browser origin (empty without an Origin)."""
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", EXPOSE_HEADERS.encode()),
        (b"vary", b"Origin"),
    ]


def preflight_headers(origin: str | None) -> Headers:
    """Headers answering an OPTIONS preflight."""
    headers: Headers = [(b"allow", ALLOW_METHODS.encode())]
    if origin is not None:
        headers += cors_headers(origin)
        headers += [
            (b"access-control-allow-methods", ALLOW_METHODS.encode()),
            (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
            (b"access-control-max-age", PREFLIGHT_MAX_AGE.encode()),
        ]
    return headers
