"""A person's browser on an MCP endpoint: sent to the tenant's connect page, or shown a readable 404.

A browser that opens `/t/<slug>/mcp` asks for `text/html` and never names `text/event-stream` (its
`*/*` does not count here); an MCP client's GET always names `text/event-stream`, and keeps the
answers it has today (AMB-230).
"""

from __future__ import annotations

from django.template.loader import render_to_string

from mcp_app.transport.wire import Headers, Request, media_types

HTML_CONTENT = (b"content-type", b"text/html; charset=utf-8")


def is_browser_visit(request: Request) -> bool:
    """A page view: GET asking for HTML and not for an event stream."""
    types = media_types(request.header("accept"))
    return request.method == "GET" and "text/html" in types and "text/event-stream" not in types


def connect_page_redirect(slug: str) -> tuple[int, Headers]:
    """The 302 to the tenant's connect page (anyone's for a public tenant; else a member's, AMB-290)."""
    return 302, [(b"location", f"/t/{slug}/connect".encode()), (b"cache-control", b"no-store")]


def not_found_page(path: str) -> tuple[bytes, Headers]:
    """The site's 404 page (templates/404.html, also Django's), for a path that serves nothing."""
    body = render_to_string("404.html", {"request_path": path})  # the page does not show it (no echo)
    return body.encode(), [HTML_CONTENT, (b"cache-control", b"no-store")]
