"""Server-Sent Events framing (the bytes of one event; the HTML SSE standard)."""

from __future__ import annotations

import json
from typing import Any

SSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    # Proxies such as nginx buffer responses unless told not to, which would hold events back.
    (b"x-accel-buffering", b"no"),
]

KEEPALIVE = b": keep-alive\n\n"


def encode_json(message: Any) -> str:
    """Serialize a JSON-RPC message compactly; json never emits a raw newline, so one data line suffices."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def event(
    data: str, *, event_id: str | None = None, name: str | None = "message", retry_ms: int | None = None
) -> bytes:
    """Frame one SSE event."""
    lines: list[str] = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    if name is not None:
        lines.append(f"event: {name}")
    # data may hold newlines only for non-JSON payloads; each line needs its own field.
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def message_event(message: dict[str, Any], event_id: str | None) -> bytes:
    """Frame one JSON-RPC message as an `event: message`."""
    return event(encode_json(message), event_id=event_id)


def priming_event(event_id: str, retry_ms: int) -> bytes:
    """Frame the 2025-11-25 priming event: an id, an empty data field and the retry hint."""
    return event("", event_id=event_id, name=None, retry_ms=retry_ms)


def retry_field(retry_ms: int) -> bytes:
    """Frame a bare `retry:` field (tells the client how long to wait before reconnecting)."""
    return f"retry: {retry_ms}\n\n".encode()
