"""What an open stream knows about its session, so that a tenant-wide event needs no session read."""

from __future__ import annotations

from typing import Any

from mcp_app.core.context import SessionState
from mcp_app.infra import notify
from mcp_app.protocol.jsonrpc import notification
from mcp_app.streams import sessions


class StreamView:
    """What an open stream knows about its session, so a tenant-wide event needs no session read.

    `initialized` never goes back once true; until then it is re-read at each list_changed (rare).
    Subscriptions are re-read when the session announces a change (`mcp.session_changed`, sent by
    `persist_session` from whichever process served the subscribe).
    """

    def __init__(self, session: SessionState) -> None:
        self.session_id = session.id
        self.initialized = session.initialized
        self.subscriptions = frozenset(session.subscriptions)

    async def refresh(self) -> bool:
        """Re-read the session; False when it is gone (the stream should close)."""
        session = await sessions.get_store().peek(self.session_id)
        if session is None:
            return False
        self.initialized = self.initialized or session.initialized
        self.subscriptions = frozenset(session.subscriptions)
        return True

    async def notification_for(self, event: dict[str, Any]) -> dict[str, Any] | None | bool:
        """The notification a channel-layer event becomes on this stream: None to skip, False to close."""
        kind = event.get("type")
        if kind == "mcp.session_changed":
            return None if await self.refresh() else False
        if kind == "mcp.list_changed" and event.get("kind") in notify.LIST_KINDS:
            if not self.initialized and not await self.refresh():
                return False
            return notification(f"notifications/{event['kind']}/list_changed") if self.initialized else None
        if kind == "mcp.resource_updated" and event.get("uri") in self.subscriptions:
            return notification("notifications/resources/updated", {"uri": event["uri"]})
        return None
