"""URL patterns of the MCP endpoints (the ASGI router sends everything else to Django)."""

from __future__ import annotations

from django.urls import re_path

from mcp_app.transport.consumer import StreamableHttpConsumer
from mcp_app.transport.legacy import LegacyMessagesConsumer, LegacySseConsumer

SLUG = r"(?P<slug>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)"

urlpatterns = [
    re_path(rf"^t/{SLUG}/mcp/?$", StreamableHttpConsumer.as_asgi()),
    re_path(rf"^t/{SLUG}/sse/?$", LegacySseConsumer.as_asgi()),
    re_path(rf"^t/{SLUG}/messages/?$", LegacyMessagesConsumer.as_asgi()),
]
