"""Helpers for admin tests: the POST data of the admin's forms, and a listener on a tenant's group."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer

from mcp_app.infra.notify import tenant_group
from mcp_app.models import Resource, Tool


def _json(value: Any) -> str:
    return "" if value is None else json.dumps(value)


def tool_form_data(tool: Tool, **overrides: Any) -> dict[str, Any]:
    """Return the POST data of the tool change form as it would be submitted unchanged."""
    data = {
        "tenant": tool.tenant_id,
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "input_schema": _json(tool.input_schema),
        "output_schema": _json(tool.output_schema),
        "handler": tool.handler,
        "python_callable": "",
        "handler_config": _json(tool.handler_config),
        "timeout_seconds": tool.timeout_seconds,
        "execution": tool.execution,
        "worker_wait_seconds": "" if tool.worker_wait_seconds is None else tool.worker_wait_seconds,
        "approval": tool.approval,
        "approval_without_elicitation": tool.approval_without_elicitation,
        "task_support": tool.task_support,
        "result_cache_seconds": tool.result_cache_seconds,
        "secret_headers": "",
        "annotations": _json(tool.annotations),
        "icons": _json(tool.icons),
        "meta": _json(tool.meta),
        "_publish": "Save and publish",
    }
    if tool.enabled:
        data["enabled"] = "on"
    if tool.result_cache_shared:
        data["result_cache_shared"] = "on"
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def resource_form_data(resource: Resource | None, tenant_id: int, **overrides: Any) -> dict[str, Any]:
    data = {
        "tenant": tenant_id,
        "uri": resource.uri if resource else "",
        "name": resource.name if resource else "",
        "title": "",
        "description": "",
        "mime_type": resource.mime_type if resource else "text/plain",
        "enabled": "on",
        "text": resource.text if resource else "",
        "annotations": "{}",
        "icons": "[]",
        "meta": "{}",
        "_publish": "Save and publish",
    }
    data.update(overrides)
    return data


FIRST_EVENT_SECONDS = 3.0


class GroupListener:
    """A channel in a tenant's group on the in-memory layer, read with a bounded wait."""

    def __init__(self, tenant_id: int) -> None:
        self.layer = get_channel_layer()
        if not isinstance(self.layer, InMemoryChannelLayer):
            # A layer of its own on Redis: the shared one's receive lock (one per process) could be
            # held by a receive another test left in a loop of its own, and this loop then met it
            # ("Lock ... is bound to a different event loop", CI). The in-memory layer has no other
            # instance to hear the group.
            self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(tenant_group(tenant_id), self.channel)

    def collect(self, timeout: float = 0.3) -> list[dict[str, Any]]:
        """Every event that arrives before `timeout` passes without a new one (one loop per call).

        Without the change token the events carry with Redis (their own test:
        test_with_redis_a_change_notification_carries_the_new_change_token).
        """
        return [{k: v for k, v in event.items() if k != "token"} for event in self.collect_raw(timeout)]

    def collect_raw(self, timeout: float = 0.3) -> list[dict[str, Any]]:
        """Every event as published."""

        async def _collect() -> list[dict[str, Any]]:
            events = []
            while True:
                # The first event may trail the commit by more than `timeout` on a busy CI machine (the
                # publish runs on commit, then crosses Redis): wait longer for it than for the next ones.
                wait = timeout if events else max(timeout, FIRST_EVENT_SECONDS)
                try:
                    events.append(await asyncio.wait_for(self.layer.receive(self.channel), wait))
                except TimeoutError:
                    return events

        return async_to_sync(_collect)()
