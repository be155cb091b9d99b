"""`subscriptions/listen` (2026-07-28 basic/patterns/subscriptions): one long-lived POST SSE stream.

The client opts in per kind: list changes of tools, prompts and resources, updates of the
resource URIs it names, and (AMB-49) the status of its own tasks: `"io.modelcontextprotocol/tasks":
true` in the filter, honoured for a signed-in caller on a tenant that serves the tasks extension;
each `notifications/tasks` carries the full task state, as tasks/get would answer it. The stream opens with `notifications/subscriptions/acknowledged` (what is
honoured: every list kind asked for, and the URIs that name one of the tenant's resources or an
expansion of one of its templates), then carries only what was asked for, each notification tagged
with the subscription id (the listen request's JSON-RPC id). Changes arrive through the tenant's
channel-layer group, so an edit made by any process reaches every listener; a listener joins only
its own tenant's group (an OAuth token is bound to one tenant), and its token is checked again before
every notification and at every keep-alive, so a revoked or expired token ends the stream. Closing
the stream ends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_app import catalog
from mcp_app.core.context import Caller
from mcp_app.core.types import Catalog
from mcp_app.core.versions import META_SUBSCRIPTION_ID
from mcp_app.infra import notify
from mcp_app.protocol import tasks
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, RequestId, notification, response
from mcp_app.protocol.resources import find_template, served_upstream
from mcp_app.transport import auth, sse
from mcp_app.transport.envelope import Envelope
from mcp_app.transport.wire import HttpError

if TYPE_CHECKING:
    from mcp_app.transport.base import McpConsumer

# Filter field -> the list kind of notify's events.
LIST_FIELDS = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}
# The tasks extension's opt-in (its filter key is its identifier; the core filter has no field for it).
TASKS_FIELD = tasks.EXTENSION
MAX_URIS = 1000
MAX_URI_LENGTH = 2048


def read_filter(envelope: Envelope) -> dict[str, Any]:
    """The SubscriptionFilter of the request, checked (-32602, HTTP 400 when malformed)."""

    def invalid(message: str) -> HttpError:
        return HttpError(
            400, f"Invalid params: {message}", code=INVALID_PARAMS, request_id=envelope.request_id
        )

    wanted = envelope.params.get("notifications")
    if not isinstance(wanted, dict):
        raise invalid('subscriptions/listen needs "notifications" (an object saying what to receive).')
    for field in [*LIST_FIELDS, TASKS_FIELD]:
        if field in wanted and not isinstance(wanted[field], bool):
            raise invalid(f"notifications.{field} must be true or false.")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(
        isinstance(u, str) and 0 < len(u) <= MAX_URI_LENGTH for u in uris
    ):
        raise invalid(
            f"notifications.resourceSubscriptions must be a list of URIs (each at most {MAX_URI_LENGTH} characters)."
        )
    if len(uris) > MAX_URIS:
        raise invalid(f"at most {MAX_URIS} resourceSubscriptions per stream.")
    return wanted


def honoured(wanted: dict[str, Any], definitions: Catalog, caller: Caller) -> dict[str, Any]:
    """What the acknowledgment promises: the list kinds asked for, the URIs this tenant serves, and
    the caller's task statuses where it has tasks to hear of."""
    agreed: dict[str, Any] = {field: True for field in LIST_FIELDS if wanted.get(field) is True}
    if (
        wanted.get(TASKS_FIELD) is True
        and tasks.modern_extension(definitions)
        and tasks.owner_key(caller.user_id, caller.client_id, caller.subject) is not None
    ):
        agreed[TASKS_FIELD] = True
    uris = [
        uri
        for uri in dict.fromkeys(wanted.get("resourceSubscriptions", []))
        if (uri in definitions.resources_by_uri or find_template(definitions, uri) is not None)
        # An upstream server's resource is not acknowledged: its updates are not relayed (AMB-193).
        and served_upstream(definitions, uri) is None
    ]
    if uris:
        agreed["resourceSubscriptions"] = uris
    return agreed


def tagged(method: str, subscription_id: RequestId, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return notification(method, {**(params or {}), "_meta": {META_SUBSCRIPTION_ID: subscription_id}})


async def serve(consumer: McpConsumer, envelope: Envelope) -> None:
    """Hold the stream open, forwarding the tenant's changes the client opted in to."""
    wanted = read_filter(envelope)
    agreed = honoured(wanted, await catalog.get_catalog(consumer.tenant.id), consumer.caller)
    subscription_id = envelope.request_id
    assert subscription_id is not None
    kinds = {LIST_FIELDS[field] for field in LIST_FIELDS if agreed.get(field)}
    uris = frozenset(agreed.get("resourceSubscriptions", ()))
    task_owner = (
        tasks.owner_key(consumer.caller.user_id, consumer.caller.client_id, consumer.caller.subject)
        if agreed.get(TASKS_FIELD)
        else None
    )

    async def send(message: dict[str, Any]) -> None:
        await consumer.send_chunk(sse.message_event(message, None))

    async def prelude() -> None:
        # The group is joined already: nothing published from here on is missed.
        await consumer.start_sse()
        await send(
            tagged("notifications/subscriptions/acknowledged", subscription_id, {"notifications": agreed})
        )

    async def authorized() -> bool:
        """The token still admits this caller (a revocation evicts it at once): else the stream ends."""
        try:
            await auth.authenticate(consumer.request, consumer.tenant)
        except HttpError:
            return False
        return True

    async def on_event(event: dict[str, Any]) -> bool:
        if not await authorized():
            return False
        # The client may ask again at once: have the changed definitions to serve it first.
        catalog.learn(consumer.tenant.id, event.get("token"))
        kind = event.get("type")
        if kind == "mcp.list_changed" and event.get("kind") in kinds:
            await send(tagged(f"notifications/{event['kind']}/list_changed", subscription_id))
        elif kind == "mcp.resource_updated" and event.get("uri") in uris:
            await send(tagged("notifications/resources/updated", subscription_id, {"uri": event["uri"]}))
        elif kind == "mcp.task_status" and task_owner is not None and event.get("owner") == task_owner:
            await send(tagged("notifications/tasks", subscription_id, event["task"]))
        return True

    async def closing() -> None:
        # The server is shutting down: the listen request's own result ends the stream gracefully.
        await send(
            response(
                subscription_id, {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: subscription_id}}
            )
        )

    await consumer.run_stream(
        [notify.tenant_group(consumer.tenant.id)],
        on_event,
        on_idle=authorized,
        prelude=prelude,
        on_drain=closing,
    )
    await consumer.end_body()
