"""Reading another registry (AMB-373): a search of its v0.1 list, or one server's version.

Any registry that speaks the v0.1 read API will do: the official one (``MCP_REGISTRY_URL``) unless the
person names another. Every read goes out through the http kind's one way out (``handlers/http.exchange``):
the SSRF guard, the pinned address, no redirects; within ``MCP_REGISTRY_FETCH_SECONDS`` for the whole
exchange and ``MCP_REGISTRY_MAX_BYTES`` of body, counted as it arrives (a registry is anyone's server: a
huge or endless answer is abandoned, not buffered). The JSON is read under the platform's nesting limit.
Every failure is a ``RegistryError`` whose message a person can act on; an entry that is not a
server.json object with a name is skipped and counted, never fatal to the page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from asgiref.sync import async_to_sync
from django.conf import settings

from lib import nesting
from mcp_app.core import ssrf
from mcp_app.core.errors import ToolError
from mcp_app.handlers import http

MAX_SEARCH = 200
MAX_PAGE = 100


class RegistryError(Exception):
    """The registry could not be read, or did not answer as a registry; ``message`` says which."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Page:
    """One page of a registry's list: its server.json objects, where the next page starts, what was skipped."""

    servers: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: str = ""
    skipped: int = 0


def registry_url(raw: str | None) -> str:
    """The registry's base URL (the default when blank): http(s), no query or fragment; RegistryError if not."""
    url = (raw or "").strip() or settings.MCP_REGISTRY_URL
    try:
        ssrf.split_url(url)
    except ssrf.SsrfRefused as exc:
        raise RegistryError(exc.message.replace("The tool's URL", "The registry URL")) from None
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise RegistryError(
            "The registry URL is its base (e.g. https://registry.modelcontextprotocol.io), without ? or #."
        )
    return url.rstrip("/")


async def _read(url: str) -> bytes:
    limit = settings.MCP_REGISTRY_MAX_BYTES
    seconds = float(settings.MCP_REGISTRY_FETCH_SECONDS)
    try:
        async with (
            asyncio.timeout(seconds),
            http.exchange(None, None, "GET", url, seconds, accept="application/json") as opened,
        ):
            status = opened.response.status_code
            if not 200 <= status < 300:
                raise RegistryError(
                    f"The registry answered HTTP {status}{' (a redirect, not followed)' if 300 <= status < 400 else ''}."
                )
            declared = opened.response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise RegistryError(f"The registry's answer is larger than {limit} bytes; refused.")
            body = bytearray()
            async for chunk in opened.response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise RegistryError(f"The registry's answer is larger than {limit} bytes; refused.")
            return bytes(body)
    except TimeoutError:
        raise RegistryError(f"The registry did not answer within {seconds:g} seconds.") from None
    except ssrf.SsrfRefused as exc:
        raise RegistryError(exc.message.replace("The tool's URL", "The registry URL")) from None
    except ToolError as exc:
        raise RegistryError(
            exc.message.replace("the upstream service", "the registry")
            .replace("The upstream service", "The registry")
            .replace("The request to the upstream service", "The request to the registry")
        ) from None


def _json(body: bytes) -> Any:
    try:
        return nesting.loads(body)
    except nesting.TooDeep:
        raise RegistryError("The registry's answer nests too deep; refused.") from None
    except ValueError:
        raise RegistryError(
            "The registry's answer is not JSON: is this the base URL of an MCP registry?"
        ) from None


def _server(item: Any) -> dict[str, Any] | None:
    """The server.json of one ServerResponse, or None when it is not one."""
    server = item.get("server") if isinstance(item, dict) else None
    if not isinstance(server, dict) or not isinstance(server.get("name"), str) or not server["name"]:
        return None
    return server


def search(raw_registry: str | None, text: str = "", cursor: str = "", limit: int = 30) -> Page:
    """One page of the registry's servers (latest versions) whose name holds ``text``."""
    base = registry_url(raw_registry)
    if len(text) > MAX_SEARCH:
        raise RegistryError(f"The search is longer than {MAX_SEARCH} characters.")
    query = {"version": "latest", "limit": str(max(1, min(limit, MAX_PAGE)))}
    if text:
        query["search"] = text
    if cursor:
        query["cursor"] = cursor
    answer = _json(async_to_sync(_read)(f"{base}/v0.1/servers?{urlencode(query)}"))
    items = answer.get("servers") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise RegistryError('The registry\'s answer is not a list of servers (no "servers" array).')
    page = Page()
    for item in items[:MAX_PAGE]:
        server = _server(item)
        if server is None:
            page.skipped += 1
        else:
            page.servers.append(server)
    page.skipped += max(0, len(items) - MAX_PAGE)
    metadata = answer.get("metadata")
    next_cursor = metadata.get("nextCursor") if isinstance(metadata, dict) else None
    page.next_cursor = next_cursor if isinstance(next_cursor, str) and len(next_cursor) <= 1000 else ""
    return page


def server_version(raw_registry: str | None, name: str, version: str = "latest") -> dict[str, Any]:
    """One version of one server (``latest`` by default), as the registry describes it."""
    base = registry_url(raw_registry)
    if not name or len(name) > 200 or not version or len(version) > 255:
        raise RegistryError("Name the server (at most 200 characters) and its version.")
    url = f"{base}/v0.1/servers/{quote(name, safe='')}/versions/{quote(version, safe='')}"
    server = _server(_json(async_to_sync(_read)(url)))
    if server is None:
        raise RegistryError("The registry's answer is not a server (no server.json with a name).")
    if server["name"] != name:
        raise RegistryError(f"The registry answered with another server ({server['name'][:200]!r}).")
    return server
