"""HTTP request and response details shared by the consumers: headers, body parsing, error bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lib import nesting
from mcp_app.protocol.jsonrpc import INVALID_REQUEST, PARSE_ERROR, RequestId

Headers = list[tuple[bytes, bytes]]

JSON_CONTENT = (b"content-type", b"application/json")
TEXT_CONTENT = (b"content-type", b"text/plain; charset=utf-8")


class HttpError(Exception):
    """An HTTP answer other than success; raised anywhere in a consumer, sent by one funnel."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int | None = INVALID_REQUEST,
        request_id: RequestId | None = None,
        headers: Headers | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code  # None: plain-text body, no JSON-RPC answer fits
        self.request_id = request_id
        self.headers = headers or []
        self.data = data  # the JSON-RPC error's `data` (e.g. -32022's supported versions)

    def body(self) -> tuple[bytes, Headers]:
        if self.code is None:
            return (self.message + "\n").encode(), [TEXT_CONTENT]
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return json.dumps({"jsonrpc": "2.0", "id": self.request_id, "error": error}).encode(), [JSON_CONTENT]


@dataclass
class Request:
    """The parts of an HTTP request scope the transport reads, decoded once."""

    method: str
    path: str
    query: str
    headers: dict[str, str] = field(default_factory=dict)
    scheme: str = "http"
    # Names (lower-case) sent more than once: a routing header must not be (first and last differ).
    repeated: frozenset[str] = frozenset()
    client: str | None = None  # the client's address (Daphne's, which honours proxy headers when told to)

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> Request:
        headers: dict[str, str] = {}
        repeated: set[str] = set()
        for name, value in scope.get("headers", []):
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            # Repeated headers (e.g. two Accept lines) mean the comma-joined list (RFC 9110 §5.3).
            if key in headers:
                headers[key] = f"{headers[key]}, {text}"
                repeated.add(key)
            else:
                headers[key] = text
        return cls(
            method=scope.get("method", "GET").upper(),
            path=scope.get("path", ""),
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            scheme=scope.get("scheme") or "http",
            repeated=frozenset(repeated),
            client=str(scope["client"][0]) if scope.get("client") else None,
        )

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


def media_types(header: str | None) -> set[str]:
    """Return the media types an Accept or Content-Type header lists, lower-cased, parameters dropped."""
    if not header:
        return set()
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",") if part.strip()}


def accepts(header: str | None, wanted: str) -> bool:
    """True when the Accept header admits `wanted`, counting `*/*` and `type/*` (AMB-9)."""
    types = media_types(header)
    major = wanted.split("/", 1)[0]
    return wanted in types or "*/*" in types or f"{major}/*" in types


def parse_json_body(body: bytes, max_depth: int) -> Any:
    """Decode a UTF-8 JSON body; raise HttpError(400, -32700) for bad bytes, bad JSON or deep nesting."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, "Parse error: the body is not valid UTF-8.", code=PARSE_ERROR) from None
    try:
        return nesting.loads(text, max_depth)
    except nesting.TooDeep:
        raise HttpError(400, f"Parse error: JSON nested deeper than {max_depth} levels.", code=PARSE_ERROR) from None
    except ValueError as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "malformed JSON"
        raise HttpError(400, f"Parse error: {detail}.", code=PARSE_ERROR) from None
