"""Helpers for the tests of this package (the fixtures are in conftest.py)."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mcp_app.core.types import TemplateDef, ToolDef

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "


class Recorder:
    """Collects the notifications a handler emits."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def methods(self) -> list[str]:
        return [m["method"] for m in self.messages]


def make_tool(handler: str, config: dict[str, Any], **kwargs: Any) -> ToolDef:
    fields: dict[str, Any] = {
        "id": 1,
        "name": "t",
        "title": "",
        "description": "",
        "input_schema": {"type": "object"},
        "output_schema": None,
        "annotations": {},
        "icons": [],
        "meta": {},
        "handler": handler,
        "handler_config": config,
    }
    fields.update(kwargs)
    return ToolDef(**fields)


def make_template(handler: str, config: dict[str, Any], mime_type: str = "application/json") -> TemplateDef:
    return TemplateDef(
        id=1,
        uri_template="demo://users/{user_id}/profile",
        name="user-profile",
        title="",
        description="",
        mime_type=mime_type,
        handler=handler,
        handler_config=config,
        completions={},
        annotations={},
        icons=[],
        meta={},
    )


@dataclass
class Upstream:
    """A local HTTP server whose replies depend on the path; it records what it received."""

    base: str
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    redirect_to: str = ""


def handler_class(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature is http.server's
            return None

        def _reply(
            self, status: int, body: bytes, content_type: str = "application/json", **headers: str
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k.replace("_", "-"), v)
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            upstream.requests.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
            )
            path = self.path.split("?", 1)[0]
            if path == "/echo":
                received = json.loads(body) if body else None
                self._reply(200, json.dumps({"received": received, "path": self.path}).encode())
            elif path == "/text":
                self._reply(200, "plain ünïcode".encode(), "text/plain; charset=utf-8")
            elif path == "/content":
                reply = {
                    "content": [{"type": "text", "text": "from upstream"}],
                    "structuredContent": {"ok": True},
                }
                self._reply(200, json.dumps(reply).encode())
            elif path == "/list":
                self._reply(200, b"[1, 2, 3]")
            elif path == "/deep":
                self._reply(200, b"[" * 8_000 + b"]" * 8_000)  # under the tests' 16 KiB reply cap
            elif path == "/image":
                self._reply(200, PNG, "image/png")
            elif path == "/fail":
                self._reply(500, b'{"detail": "database password is hunter2"}')
            elif path == "/unavailable":
                self._reply(503, b"down")
            elif path == "/slow":
                time.sleep(1.5)
                self._reply(200, b"{}")
            elif path == "/big":
                chunk = b"x" * 1024
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()  # no Content-Length: the client must count while streaming
                for _ in range(64):
                    self.wfile.write(chunk)
            elif path == "/redirect":
                self._reply(302, b"", "text/plain", Location=upstream.redirect_to)
            else:
                self._reply(404, b"not found", "text/plain")

        do_GET = do_POST = do_PUT = do_DELETE = _handle

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Tests hang up on purpose (timeouts, oversize replies); the broken pipe is expected.
        return None
