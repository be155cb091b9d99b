"""The tenant catalog: facts and enabled definitions per tenant, cached per change token."""

from mcp_app.catalog.loader import cached_tenant_id, clear_caches, get_catalog, get_tenant, note_change
from mcp_app.catalog.tokens import (
    begin_request,
    current_version,
    learn,
    pushed,
    remember_token,
    subscription_mark,
    version_key,
)

__all__ = [
    "begin_request",
    "cached_tenant_id",
    "clear_caches",
    "current_version",
    "get_catalog",
    "get_tenant",
    "learn",
    "note_change",
    "pushed",
    "remember_token",
    "subscription_mark",
    "version_key",
]
