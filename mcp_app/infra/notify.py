"""Cross-process server→client events, published through the channel layer.

Any process (a Daphne worker, the admin, a Celery worker, a management command) publishes;
the transport's open GET streams receive them. Group names and message shapes are the contract.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

LIST_KINDS = ("tools", "prompts", "resources")

# (tenant id, event) of each tenant event published inside `captured()`.
_captured: ContextVar[list[tuple[int, dict[str, Any]]] | None] = ContextVar("mcp_notify_captured", default=None)


def tenant_group(tenant_id: int) -> str:
    """Every open stream of every session of the tenant joins this group."""
    return f"mcp.tenant.{tenant_id}"


def session_group(session_id: str) -> str:
    """Every open stream of one session joins this group (session ids are [A-Za-z0-9_-])."""
    return f"mcp.session.{session_id}"


# Message shapes (the "type" maps to a consumer method with dots → underscores):
#   {"type": "mcp.list_changed", "kind": "tools"|"prompts"|"resources", "version": int[, "token": int]}
#   {"type": "mcp.resource_updated", "uri": str, "version": int[, "token": int]}
#   {"type": "mcp.task_status", "owner": [user_id, client_id, subject], "task": {Task, as tasks/get answers}}
#       (a 2026-07-28 task's status changed; only its owner's listen streams forward it)
#   ("token", with Redis: the new change token, which a stream learns before forwarding)
#   {"type": "mcp.session_message", "message": {JSON-RPC notification}}     (session group)
#   {"type": "mcp.session_closed"}                                          (session group)
#   {"type": "mcp.cancel", "request_id": str|int, "reason": str|None}      (session group)
#   {"type": "mcp.session_changed", "session_id": str}                     (session group: its
#       initialized flag or subscriptions changed; an open stream re-reads the session once)


async def apublish_tenant(tenant_id: int, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(tenant_group(tenant_id), event)


async def apublish_session(session_id: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(session_group(session_id), event)


@contextmanager
def captured() -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """Also keep what is published to tenants here: an owner's work run in a process of its own
    (content/forked.py) hands it to the serving process, whose streams an in-memory layer cannot reach."""
    events: list[tuple[int, dict[str, Any]]] = []
    reset = _captured.set(events)
    try:
        yield events
    finally:
        _captured.reset(reset)


def publish_tenant(tenant_id: int, event: dict[str, Any]) -> None:
    """Synchronous publish for signal handlers, admin views and Celery tasks."""
    if (events := _captured.get()) is not None:
        events.append((tenant_id, event))
    try:
        async_to_sync(apublish_tenant)(tenant_id, event)
    except Exception:  # a notification must never break the edit that caused it
        logger.exception("could not publish %s to tenant %s", event.get("type"), tenant_id)


def _with_token(event: dict[str, Any], token: int | None) -> dict[str, Any]:
    return event if token is None else {**event, "token": token}


def publish_list_changed(tenant_id: int, kind: str, version: int, token: int | None = None) -> None:
    assert kind in LIST_KINDS, kind
    publish_tenant(tenant_id, _with_token({"type": "mcp.list_changed", "kind": kind, "version": version}, token))


def publish_resource_updated(tenant_id: int, uri: str, version: int, token: int | None = None) -> None:
    publish_tenant(tenant_id, _with_token({"type": "mcp.resource_updated", "uri": uri, "version": version}, token))
