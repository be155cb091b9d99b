"""A real registry that misbehaves, on 127.0.0.1 (a thread of this process): each base path one way.

``/huge`` answers more bytes than any bound (declared, or chunked without a length), ``/slow`` answers
only after ``SLOW_SECONDS``, ``/malformed`` is not JSON, ``/not-a-list`` is JSON of the wrong shape,
``/redirect`` sends elsewhere, ``/internal`` lists entries whose remotes point at internal addresses
(and answers their versions), ``/mixed`` holds good entries among broken ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

SLOW_SECONDS = 5.0
HUGE_BYTES = 3 * 1024 * 1024

INTERNAL = [
    {"name": "io.evil/private-net", "description": "d", "version": "1.0.0",
     "remotes": [{"type": "streamable-http", "url": "http://10.0.0.5/mcp"}]},
    {"name": "io.evil/metadata", "description": "d", "version": "1.0.0",
     "remotes": [{"type": "sse", "url": "https://169.254.169.254/latest/meta-data"}]},
    {"name": "io.evil/mapped", "description": "d", "version": "1.0.0",
     "remotes": [{"type": "streamable-http", "url": "https://[::ffff:192.168.1.1]/mcp"}]},
]  # fmt: skip
MIXED: list[Any] = [
    "not an object",
    {"server": "not an object"},
    {"server": {"description": "no name"}},
    {"server": {"name": "io.good/remote", "description": "d", "version": "2.0.0", "remotes": [
        {"type": "stdio"}, {"type": "websocket", "url": "wss://x.example/mcp"},
        {"type": "streamable-http", "url": "https://{tenant}.example.com/mcp"},
        {"type": "streamable-http", "url": "https://mcp.good.example/mcp",
         "headers": [{"name": "Authorization", "isRequired": True, "isSecret": True, "description": "A token"},
                     {"name": "bad header"}]}]}},
    {"server": {"name": "io.good/packages-only", "description": "d", "version": "1.0.0",
                "packages": [{"registryType": "npm", "identifier": "x", "version": "1", "transport": {"type": "stdio"}}]}},
]  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {"Content-Length": str(len(body))}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        kind = path.split("/")[1]
        try:
            if kind == "huge":
                self._send(200, b'{"servers": [' + b" " * HUGE_BYTES + b"]}")
            elif kind == "huge-chunked":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # no length: read until closed
                self.wfile.write(b'{"servers": [')
                for _ in range(HUGE_BYTES // 65536):
                    self.wfile.write(b" " * 65536)
                self.wfile.write(b"]}")
                self.close_connection = True
            elif kind == "slow":
                time.sleep(SLOW_SECONDS)
                self._send(200, b'{"servers": []}')
            elif kind == "malformed":
                self._send(200, b'{"servers": [{"server": ')
            elif kind == "not-a-list":
                self._send(200, b'{"servers": "everything"}')
            elif kind == "redirect":
                self._send(302, b"", {"Location": "http://10.0.0.5/", "Content-Length": "0"})
            elif kind == "internal" and path.endswith("/versions/latest"):
                name = path.removeprefix("/internal/v0.1/servers/").removesuffix("/versions/latest")
                entry = next(s for s in INTERNAL if s["name"] == name)
                self._send(200, json.dumps({"server": entry}).encode())
            elif kind == "internal":
                self._send(200, json.dumps({"servers": [{"server": s} for s in INTERNAL]}).encode())
            elif kind == "mixed" and path.endswith("/versions/latest"):
                self._send(200, json.dumps(MIXED[3]).encode())
            elif kind == "mixed":
                self._send(200, json.dumps({"servers": MIXED, "metadata": {"nextCursor": 7}}).encode())
            else:
                self._send(404, b'{"error": "Server not found"}')
        except (BrokenPipeError, ConnectionResetError):
            pass  # the platform gave up on it: the point of the test


@contextmanager
def hostile_registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
