"""URL patterns of the MCP endpoints (the ASGI router sends everything else to Django)."""

from __future__ import annotations

from typing import Any

from django.urls import re_path

from mcp_app.transport.consumer import StreamableHttpConsumer
from mcp_app.transport.legacy import LegacyMessagesConsumer, LegacySseConsumer

SLUG = r"(?P<slug>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)"


def asgi_route(regex: str, application: Any) -> Any:
    """Django's re_path to an ASGI application, as channels' URLRouter takes it. Typed loosely on
    purpose: Django's stubs type re_path's target as a view, channels' want a pattern type of their own."""
    return re_path(regex, application)


urlpatterns = [
    asgi_route(rf"^t/{SLUG}/mcp/?$", StreamableHttpConsumer.as_asgi()),
    asgi_route(rf"^t/{SLUG}/sse/?$", LegacySseConsumer.as_asgi()),
    asgi_route(rf"^t/{SLUG}/messages/?$", LegacyMessagesConsumer.as_asgi()),
]
