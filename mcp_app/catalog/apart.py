"""An owner's heavy work (an import, a sync that publishes thousands of tools) run apart from the serving
process, and its changes announced here too (AMB-277).

``run_apart(fn, *args)`` runs ``fn`` in a process of its own (content/forked.py: its value comes back, or
its exception is raised here). That process announces what it commits as any process does (the signals
of signals/definitions.py); where the channel layer does not cross processes (no Redis: the embedded
layout) nobody here hears it, so the serving process announces it again: its catalog drops the tenant's
entry and learns the new version at once (no wait for the version recheck), and its own streams get the
``list_changed`` and ``resources/updated`` the other process sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings

from mcp_app.catalog.loader import note_change
from mcp_app.content import forked
from mcp_app.infra import notify

logger = logging.getLogger(__name__)

# The work's process died, outlived its deadline, or never got a turn (content/forked.py): its callers
# answer 503 with this message (the API's error handler) or show it (the admin), never a 500.
Unfinished = forked.Lost

T = TypeVar("T")


def run_apart(fn: Callable[..., T], *args: Any, timeout: float = 600.0) -> T:
    """``fn(*args)`` in a process of its own; what it announced is announced again here when no shared
    layer (Redis) carried it to this process."""
    value, events = forked.run_capturing(fn, *args, timeout=timeout)
    if not settings.REDIS_URL:
        for tenant_id, event in events:
            try:
                if isinstance(event.get("version"), int):
                    note_change(tenant_id, event["version"])
            except Exception:
                logger.exception("could not invalidate the catalog of tenant %s", tenant_id)
            notify.publish_tenant(tenant_id, event)
    return value
