"""Probes for load balancers and orchestrators (django-health-check): `/health/live` and `/health/ready`.

Live: the process answers; nothing else is looked at, so a slow database never gets a healthy process
restarted. Ready: this process can serve: the database answers and is migrated, Redis and the channel
layer answer when configured. The background workers' state (`workers`: up, down, inline) is reported
beside the checks and never fails the probe (AMB-113), and so are the upstream servers this process
called (`upstreams`: how many, how many circuits open; counts only, AMB-174). Each check has a one-second budget (the channel
layer's round trip three); the migration check is remembered once it passed (migrations do not go backwards under a running process). Both answer JSON to machines (an
`Accept: application/json` or `?format=json`) and a short page to people; not ready is 503.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import logging
import uuid
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers, get_channel_layer
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from health_check.base import HealthCheck
from health_check.checks import Database
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView

from mcp_app.background import presence
from mcp_app.background import relay as background
from mcp_app.federation import breaker, call_stats
from mcp_app.infra import redis_client

logger = logging.getLogger(__name__)

BUDGET = datetime.timedelta(seconds=1)
_migrated: set[str] = set()


@dataclasses.dataclass
class DatabaseAnswers(Database):
    """django-health-check's `SELECT 1`, after replacing this thread's kept connection if the server
    dropped it. Sync checks run on the event loop's executor threads, where no request's start or end
    (Django's usual moment) ever looks at a kept connection: after a PostgreSQL restart each such
    thread failed every later check, and readiness flapped between 200 and 503 for good
    (bench/readiness_flip.py: 87% 503 over the 30 s after the second restart)."""

    timeout = BUDGET  # django-health-check's default is five seconds; the other checks have one

    def run(self) -> None:
        connections[self.alias].close_if_unusable_or_obsolete()
        super().run()


@dataclasses.dataclass
class Migrated(HealthCheck):
    """Every migration of the code is applied (a process started before `migrate` finished is not ready)."""

    alias: str = DEFAULT_DB_ALIAS
    timeout = BUDGET

    def run(self) -> None:
        if self.alias in _migrated:
            return
        connection = connections[self.alias]
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise ServiceUnavailable("The database has migrations still to apply.")
        _migrated.add(self.alias)


@dataclasses.dataclass
class RedisAnswers(HealthCheck):
    """REDIS_URL answers a PING (sessions, events, change tokens and background replies live there)."""

    timeout = BUDGET

    async def run(self) -> None:
        if not redis_client.enabled():
            return
        try:
            await asyncio.wait_for(redis_client.client().ping(), BUDGET.total_seconds())
        except Exception as exc:  # noqa: BLE001 - any failure means not ready; the reason is logged
            raise ServiceUnavailable("Redis does not answer.") from exc


# A round trip through Redis takes milliseconds; the first one of a process also starts its reader.
LAYER_BUDGET = datetime.timedelta(seconds=3)


_probe_layers: list[Any] = []


def _probe_layer() -> Any:
    """A layer object of the probe's own on the configured backend: the process's shared one has its
    consumers' receive() in progress, and a second receiver there waits on them (channels_redis)."""
    if get_channel_layer() is None:
        return None
    if not _probe_layers:
        _probe_layers.append(channel_layers.make_backend(DEFAULT_CHANNEL_LAYER))
    return _probe_layers[0]


@dataclasses.dataclass
class ChannelLayerAnswers(HealthCheck):
    """A message sent to this process through the channel layer comes back (cross-process notifications)."""

    timeout = LAYER_BUDGET

    async def run(self) -> None:
        layer = _probe_layer()
        if layer is None:
            return
        try:
            channel = await layer.new_channel("health.")
            marker = uuid.uuid4().hex
            await layer.send(channel, {"type": "health.ping", "marker": marker})
            message = await asyncio.wait_for(layer.receive(channel), LAYER_BUDGET.total_seconds())
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable("The channel layer does not answer.") from exc
        if message.get("marker") != marker:
            raise ServiceUnavailable("The channel layer answered with another message.")


async def workers_state() -> dict[str, Any]:
    """`workers`: up, down or inline (no workers in this deployment), and how many are alive (AMB-113)."""
    if not background.enabled():
        return {"workers": presence.INLINE}
    try:
        alive = await asyncio.wait_for(presence.aalive(), BUDGET.total_seconds())
    except Exception:  # noqa: BLE001 - Redis away fails RedisAnswers already; nobody is known to be alive
        logger.warning("could not count the background workers", exc_info=True)
        alive = 0
    return {"workers": presence.UP if alive else presence.DOWN, "workers_alive": alive}


def upstreams_state() -> dict[str, int]:
    """How many upstream servers this process called, and how many of their breakers are not closed.

    Counts only: the probe answers without credentials, so no tenant or upstream is named here (they
    are in /metrics and the tenant's admin). Never a reason to be unready (AMB-174).
    """
    circuits = [h.circuit for h in call_stats.snapshot().values()]
    return {
        "seen": len(circuits),
        "open": circuits.count(breaker.OPEN),
        "half_open": circuits.count(breaker.HALF_OPEN),
    }


class ReadinessView(HealthCheckView):
    """Ready when this process can serve: its database, Redis and channel layer answer. The workers'
    state is reported beside the checks and never makes the process unready: a worker outage must not
    take every web process out of the load balancer (AMB-113); background calls wait for a worker
    meanwhile (AMB-114)."""

    checks = (DatabaseAnswers, Migrated, RedisAnswers, ChannelLayerAnswers)
    template_name = "health/ready.html"

    async def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.workers = await workers_state()
        self.upstreams = upstreams_state()
        response = await super().get(request, *args, **kwargs)
        if response.status_code == 500:
            response.status_code = 503  # not ready: send traffic elsewhere (nothing here has failed)
        return response

    def render_to_response_json(self, status: int) -> JsonResponse:
        response = super().render_to_response_json(status)
        body = json.loads(response.content)
        return JsonResponse({**body, **self.workers, "upstreams": self.upstreams}, status=status)

    def render_to_response_text(self, status: int) -> HttpResponse:
        response = super().render_to_response_text(status)
        lines = "".join(f"{name}: {value}\n" for name, value in self.workers.items())
        lines += "".join(f"upstreams_{name}: {value}\n" for name, value in self.upstreams.items())
        response.content = response.content + lines.encode()
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "workers": self.workers, "upstreams": self.upstreams}


@never_cache
def live(request: HttpRequest) -> HttpResponse:
    """The process answers: no database, no Redis (a liveness probe must not restart a healthy process)."""
    if "html" in request.headers.get("accept", "") and request.GET.get("format") != "json":
        return HttpResponse("<!doctype html><title>Live</title><p>This process is live.</p>")
    return JsonResponse({"status": "live"})
