"""URL patterns of the MCP endpoints (the ASGI router sends everything else to Django)."""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, re_path

from mcp_app.transport.consumer import StreamableHttpConsumer
from mcp_app.transport.legacy import LegacyMessagesConsumer, LegacySseConsumer

SLUG = r"(?P<slug>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)"



def _route(regex: str, application: Any) -> URLPattern:
    """Django's re_path around an ASGI application: channels' URLRouter routes these (Django's stubs
    type re_path's target as a view, which an ASGI application is not)."""
    return re_path(regex, application)


urlpatterns = [
    _route(rf"^t/{SLUG}/mcp/?$", StreamableHttpConsumer.as_asgi()),
    _route(rf"^t/{SLUG}/sse/?$", LegacySseConsumer.as_asgi()),
    _route(rf"^t/{SLUG}/messages/?$", LegacyMessagesConsumer.as_asgi()),
]
