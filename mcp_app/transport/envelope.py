"""The era of a POST, and the checks a 2026-07-28 request passes before it is served.

A POST is modern when its body's `_meta` names a protocol version, or its MCP-Protocol-Version
header names a modern one; everything else (initialize, session-bound requests, batches) is
legacy and served as before (2026-07-28 basic/versioning, "dual-era server").

A modern request is checked in this order, the first failure answering (HTTP 400 unless said):
1. one JSON-RPC request or notification, not a batch nor a response (-32600);
2. `params._meta` carries the protocol version and the client capabilities, well formed (-32602);
3. the headers mirror the body: MCP-Protocol-Version, Mcp-Method, and Mcp-Name for the methods
   that name something (-32020 HeaderMismatch) - before the version check, so a client that
   disagrees with itself is told so rather than told its version is unsupported;
4. the version is one this endpoint serves statelessly (-32022, with `supported` and `requested`);
5. the method exists in this revision (HTTP 404, -32601), with a hint for the ones it removed.
Mcp-Param-* headers need the tool's input schema, so they are checked by the runner (modern.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_app.core.mcp_headers import NAME_BEARING_METHODS, decode_value, header_safe
from mcp_app.core.notifications import LOG_LEVELS
from mcp_app.core.versions import (
    ALL_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    SUPPORTED_VERSIONS,
)
from mcp_app.protocol.dispatch import METHODS, entry_for
from mcp_app.protocol.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    InvalidRequest,
    RequestId,
    classify,
    truncate,
    usable_id,
)
from mcp_app.transport.wire import HttpError, Request

VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
SESSION_HEADER = "mcp-session-id"
LISTEN = "subscriptions/listen"


@dataclass(frozen=True)
class Envelope:
    """A modern request's own description of itself, checked."""

    version: str
    method: str
    request_id: RequestId | None  # None: a notification
    params: dict[str, Any]
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None


def is_modern_request(body: Any, request: Request) -> bool:
    """True when this POST belongs to the stateless era (decided per request)."""
    header = (request.header(VERSION_HEADER) or "").strip()
    if header in MODERN_VERSIONS:
        return True
    if not isinstance(body, dict):
        return False
    params = body.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or META_PROTOCOL_VERSION not in meta:
        return False
    # A legacy session's request that also names its own (legacy) version stays with the session.
    return not (meta[META_PROTOCOL_VERSION] in SUPPORTED_VERSIONS and request.header(SESSION_HEADER))


def read(body: Any, request: Request) -> Envelope:
    """Check a modern POST (the module docstring's order); HttpError for the first failure."""
    if not isinstance(body, dict):
        raise HttpError(400, "Invalid request: a 2026-07-28 POST carries one JSON-RPC message, not a batch.")
    request_id = usable_id(body)
    try:
        kind = classify(body)
    except InvalidRequest as exc:
        raise HttpError(400, f"Invalid request: {exc.message}", request_id=request_id) from None
    if kind == "response":
        raise HttpError(400, "Invalid request: a client sends requests and notifications, not responses.")
    method: str = body["method"]
    if kind == "notification":
        request_id = None
    params = body.get("params")
    if not isinstance(params, dict):
        raise _invalid(request_id, "params must be an object carrying the _meta envelope.")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise _invalid(
            request_id,
            f"params._meta must be an object carrying {META_PROTOCOL_VERSION!r} and "
            f"{META_CLIENT_CAPABILITIES!r}.",
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise _invalid(request_id, f"params._meta is missing {' and '.join(repr(k) for k in missing)}.")
    version = meta[META_PROTOCOL_VERSION]
    if request_id is not None:
        _check_headers(request, body, version, request_id)
    if not isinstance(version, str):
        raise _invalid(request_id, f"{META_PROTOCOL_VERSION} must be a string.")
    if version not in MODERN_VERSIONS:
        served = f"served statelessly: {', '.join(MODERN_VERSIONS)}"
        if version in SUPPORTED_VERSIONS:
            served += f"; {version} is served after initialize, in a session"
        raise HttpError(
            400,
            truncate(f"Unsupported protocol version {version!r} ({served}).", 300),
            code=UNSUPPORTED_PROTOCOL_VERSION,
            request_id=request_id,
            data={"supported": list(ALL_VERSIONS), "requested": truncate(version, 100)},
        )
    capabilities = meta[META_CLIENT_CAPABILITIES]
    if not isinstance(capabilities, dict):
        raise _invalid(request_id, f"{META_CLIENT_CAPABILITIES} must be an object.")
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not isinstance(client_info, dict):
        raise _invalid(request_id, f"{META_CLIENT_INFO} must be an object with name and version.")
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise _invalid(request_id, f"{META_LOG_LEVEL} must be one of: {', '.join(LOG_LEVELS)}.")
    if request_id is not None and method != LISTEN and entry_for(method, modern=True) is None:
        hint = METHODS[method].removed if method in METHODS else ""
        text = f"Method not found: {method}" + (f" ({hint})." if hint else ".")
        raise HttpError(404, truncate(text, 300), code=METHOD_NOT_FOUND, request_id=request_id)
    return Envelope(version, method, request_id, params, capabilities, client_info, log_level)


def _invalid(request_id: RequestId | None, message: str) -> HttpError:
    return HttpError(400, f"Invalid params: {message}", code=INVALID_PARAMS, request_id=request_id)


def _mismatch(request_id: RequestId, message: str) -> HttpError:
    return HttpError(
        400, truncate(f"Header mismatch: {message}", 300), code=HEADER_MISMATCH, request_id=request_id
    )


def _header(request: Request, name: str, request_id: RequestId) -> str | None:
    """A routing header's value, whitespace trimmed; None when absent. Refused when repeated or unsafe."""
    raw = request.header(name)
    if raw is None:
        return None
    if name in request.repeated:
        raise _mismatch(request_id, f"the {name} header appears more than once.")
    if not header_safe(raw):
        raise _mismatch(request_id, f"the {name} header holds characters a header value may not.")
    return raw.strip()


def _check_headers(request: Request, body: dict[str, Any], version: Any, request_id: RequestId) -> None:
    """The standard request headers mirror the body (streamable-http "Server Validation")."""
    header = _header(request, VERSION_HEADER, request_id)
    if header is None:
        raise _mismatch(request_id, "the MCP-Protocol-Version header is required.")
    if header != version:
        raise _mismatch(
            request_id, f"MCP-Protocol-Version {header!r} differs from the body's _meta version {version!r}."
        )
    method = body["method"]
    header = _header(request, METHOD_HEADER, request_id)
    if header is None:
        raise _mismatch(request_id, "the Mcp-Method header is required.")
    if header != method:
        raise _mismatch(request_id, f"Mcp-Method {header!r} differs from the body's method {method!r}.")
    key = NAME_BEARING_METHODS.get(method)
    if key is None:
        return
    expected = body["params"].get(key)
    if not isinstance(expected, str):
        return  # the method itself answers a missing name or uri (-32602)
    header = _header(request, NAME_HEADER, request_id)
    if header is None:
        raise _mismatch(request_id, f"the Mcp-Name header is required for {method}.")
    decoded = decode_value(header)
    if decoded is None:
        raise _mismatch(request_id, "the Mcp-Name header holds malformed base64.")
    if decoded != expected:
        raise _mismatch(
            request_id,
            f"Mcp-Name {truncate(decoded, 100)!r} differs from the body's {key} {truncate(expected, 100)!r}.",
        )
