"""A local Petstore that checks what it receives, for the OpenAPI import's end-to-end tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).with_name("fixtures")
TOKEN = "Bearer pet-t0ken"


@dataclass
class Petstore:
    """Both Petstores of the fixtures: /v1 (petstore.yaml) and /v2 (petstore-expanded.yaml)."""

    base: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    pets: dict[int, dict[str, Any]] = field(
        default_factory=lambda: {1: {"id": 1, "name": "Rex", "tag": "dog"}}
    )

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, auth: str
    ) -> tuple[int, Any]:
        """The reply to one request; 400 when the request is not what the operation describes."""
        if path.endswith("/openapi.yaml"):
            return 200, (FIXTURES / "petstore-expanded.yaml").read_text()
        if auth != TOKEN:
            return 401, {"code": 401, "message": "no token"}
        parts = path.strip("/").split("/")
        if parts[1:] == ["pets"] and method == "GET":
            if set(query) - {"limit", "tags"} or body is not None:
                return 400, {"code": 400, "message": f"unexpected query or body: {query} {body}"}
            pets = [p for p in self.pets.values() if not query.get("tags") or p.get("tag") in query["tags"]]
            return 200, pets[: int(query.get("limit", ["100"])[0])]
        if parts[1:] == ["pets"] and method == "POST":
            if query or not isinstance(body, dict) or not isinstance(body.get("name"), str):
                return 400, {"code": 400, "message": f"unexpected query or body: {query} {body}"}
            pet = {"id": body.get("id", max(self.pets) + 1), **body}
            self.pets[pet["id"]] = pet
            return (201, None) if parts[0] == "v1" else (200, pet)
        if len(parts) == 3 and parts[1] == "pets" and method in ("GET", "DELETE"):
            if query or body is not None or not parts[2].isdigit():
                return 400, {"code": 400, "message": f"unexpected request: {path} {query} {body}"}
            pet = self.pets.get(int(parts[2]))
            if pet is None:
                return 404, {"code": 404, "message": "no such pet"}
            if method == "DELETE":
                del self.pets[pet["id"]]
                return 204, None
            return 200, pet
        return 404, {"code": 404, "message": f"no route {method} {path}"}


def _handler(store: Petstore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            return None

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            split = urlsplit(self.path)
            query = parse_qs(split.query)
            store.requests.append({"method": self.command, "path": split.path, "query": query, "body": body})
            status, reply = store.answer(
                self.command, split.path, query, body, self.headers.get("Authorization", "")
            )
            data = b"" if reply is None else (reply if isinstance(reply, str) else json.dumps(reply)).encode()
            self.send_response(status)
            kind = "application/yaml" if isinstance(reply, str) else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def running_petstore() -> Iterator[Petstore]:
    store = Petstore()
    server = _Server(("127.0.0.1", 0), _handler(store))
    store.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield store
    finally:
        server.shutdown()
        server.server_close()
