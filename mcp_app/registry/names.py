"""A listed tenant's server name in the registry: ``<namespace>/<slug>`` (AMB-372).

The registry's naming rule is reverse-DNS namespace, one slash, a name (``^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$``,
3-200 characters). The namespace is the operator's ``MCP_REGISTRY_NAMESPACE``, else the host of
``MCP_PUBLIC_URL`` reversed (``mcp.example.com`` → ``com.example.mcp``; the port is dropped): the host
every tenant's MCP URL is on, so a name stays as stable as the URL it names. A slug is 1-63 lower-case
letters, digits and hyphens, always a legal name part, and never changes (the API refuses to).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# A namespace this long leaves room for the longest slug (63) and the slash within the 200 allowed.
MAX_NAMESPACE = 136
_NOT_NAMESPACE = re.compile(r"[^a-zA-Z0-9.-]")
_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def namespace() -> str:
    """The namespace of every server this platform lists."""
    if settings.MCP_REGISTRY_NAMESPACE:
        return str(settings.MCP_REGISTRY_NAMESPACE)
    host = (urlsplit(settings.MCP_PUBLIC_URL).hostname or "").rstrip(".")
    # An IPv6 literal's colons are no namespace characters: they become hyphens, as any other would.
    reversed_host = ".".join(reversed(_NOT_NAMESPACE.sub("-", host).split(".")))
    if not reversed_host or len(reversed_host) > MAX_NAMESPACE:
        raise ImproperlyConfigured(
            f"The registry namespace {reversed_host!r} (from MCP_PUBLIC_URL) is empty or longer than "
            f"{MAX_NAMESPACE} characters: set MCP_REGISTRY_NAMESPACE."
        )
    return reversed_host


def server_name(slug: str) -> str:
    return f"{namespace()}/{slug}"


def slug_of(name: str) -> str | None:
    """The slug a server name of this platform names; None for any other name (another namespace, no slug)."""
    space, slash, slug = name.partition("/")
    if not slash or space != namespace() or not _SLUG.match(slug):
        return None
    return slug
