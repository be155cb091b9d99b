"""Prometheus metrics at /metrics: what this process counted, and what every process shares.

Per process (a Prometheus server scrapes each one): MCP requests by tenant, method and outcome and
tool-call latency histograms per tool, from the usage recorder (mcp_app/usage/recorder.py: counted in
memory, no database write and no Redis round trip per request), and the authorization server's
outcomes (mcp_app/oauth/events.py) and refusals past a quota or cap (protocol/quotas.py). Shared, read at scrape time: open sessions and listen streams
per tenant, background runs by status, the Celery queue's depth and the workers taking jobs from it.
Upstream servers' health in this process (mcp_app/federation/call_stats.py): exchanges by outcome, latency,
breaker state and last success, by tenant slug and upstream name (AMB-173). Labels stay bounded: the
recorder caps a tenant's (method, tool) pairs, a tenant's upstreams past MCP_METRICS_MAX_UPSTREAMS (the
most called kept) are `(other)`, and past MCP_METRICS_MAX_TENANTS tenants (the busiest kept) the rest
are `(other)`.

Protected: with MCP_METRICS_TOKEN set, a request needs `Authorization: Bearer <it>`; with
MCP_METRICS_ALLOW (networks, comma-separated), its address must be in one of them; with neither, only
loopback addresses are answered.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mcp_app.background import presence
from mcp_app.federation import breaker, call_stats
from mcp_app.infra import redis_client
from mcp_app.models import LATENCY_BOUNDS_MS, ToolRun, Upstream
from mcp_app.oauth import events
from mcp_app.protocol import quotas
from mcp_app.usage import live
from mcp_app.usage.recorder import OTHER, Counts, recorder
from tenants import wall
from tenants.models import Tenant

logger = logging.getLogger(__name__)

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def _slugs(tenant_ids: set[int]) -> dict[int, str]:
    return dict(Tenant.objects.filter(pk__in=tenant_ids).values_list("pk", "slug"))


def _bounded(totals: dict[tuple[int, str, str], Counts]) -> dict[tuple[str, str, str], Counts]:
    """Totals keyed by tenant slug, the tenants past the cap (the least busy) folded into `(other)`."""
    calls: dict[int, int] = {}
    for (tenant_id, _method, _tool), counts in totals.items():
        calls[tenant_id] = calls.get(tenant_id, 0) + counts.calls
    kept = set(sorted(calls, key=calls.__getitem__, reverse=True)[: settings.MCP_METRICS_MAX_TENANTS])
    slugs = _slugs(kept)
    out: dict[tuple[str, str, str], Counts] = {}
    for (tenant_id, method, tool), counts in totals.items():
        slug = slugs.get(tenant_id, OTHER) if tenant_id in kept else OTHER
        out.setdefault((slug, method, tool if slug != OTHER else ""), Counts()).add(counts)
    return out


def _buckets(bounds_ms: tuple[int, ...] | list[int], histogram: list[int]) -> list[tuple[str, int]]:
    """Prometheus' cumulative buckets (upper bounds in seconds) of a millisecond histogram."""
    cumulative, buckets = 0, []
    for bound, n in zip([*bounds_ms, float("inf")], histogram, strict=True):
        cumulative += n
        buckets.append(("+Inf" if bound == float("inf") else str(bound / 1000), cumulative))
    return buckets


def _upstreams_bounded() -> dict[tuple[str, str], list[call_stats.Health]]:
    """This process's upstream health by (tenant slug, upstream name), bounded: per tenant the
    MCP_METRICS_MAX_UPSTREAMS most called keep their name, the rest are `(other)`; past
    MCP_METRICS_MAX_TENANTS tenants (the busiest kept) the rest are `(other)`, `(other)` (AMB-173)."""
    found = call_stats.snapshot()
    if not found:
        return {}
    per_tenant: dict[int, list[tuple[int, int]]] = {}
    for key in found:
        per_tenant.setdefault(key[0], []).append(key)
    calls = {tenant_id: sum(found[k].calls for k in keys) for tenant_id, keys in per_tenant.items()}
    ranked = sorted(calls, key=calls.__getitem__, reverse=True)
    kept_tenants = set(ranked[: settings.MCP_METRICS_MAX_TENANTS])
    cap = settings.MCP_METRICS_MAX_UPSTREAMS
    named: set[tuple[int, int]] = set()
    for tenant_id in kept_tenants:
        named.update(sorted(per_tenant[tenant_id], key=lambda k: found[k].calls, reverse=True)[:cap])
    slugs = _slugs(kept_tenants)
    # Names only (never the URL or a header): read across tenants, as the rest of the scrape.
    names = dict(Upstream.objects.filter(pk__in={k[1] for k in named}).values_list("pk", "name"))
    out: dict[tuple[str, str], list[call_stats.Health]] = {}
    for (tenant_id, upstream_id), health in found.items():
        slug = slugs.get(tenant_id, OTHER) if tenant_id in kept_tenants else OTHER
        name = names.get(upstream_id, OTHER) if (tenant_id, upstream_id) in named else OTHER
        out.setdefault((slug, name if slug != OTHER else OTHER), []).append(health)
    return out


def _upstream_families(grouped: dict[tuple[str, str], list[call_stats.Health]]) -> Iterator[Any]:
    calls = CounterMetricFamily(
        "mcp_upstream_calls",
        "Exchanges with upstream MCP servers in this process, by outcome (ok or the failure's kind).",
        labels=["tenant", "upstream", "outcome"],
    )
    latency = HistogramMetricFamily(
        "mcp_upstream_call_duration_seconds",
        "Latency of the exchanges an upstream answered, in this process.",
        labels=["tenant", "upstream"],
    )
    circuits = GaugeMetricFamily(
        "mcp_upstream_circuit",
        "Upstreams whose breaker in this process is in this state (1 for a named upstream).",
        labels=["tenant", "upstream", "state"],
    )
    success = GaugeMetricFamily(
        "mcp_upstream_last_success_timestamp_seconds",
        "When an exchange with the upstream last gave a result in this process (Unix time).",
        labels=["tenant", "upstream"],
    )
    for (slug, name), members in sorted(grouped.items()):
        failures = {kind: sum(h.failures[kind] for h in members) for kind in call_stats.KINDS}
        total = sum(h.calls for h in members)
        calls.add_metric([slug, name, "ok"], total - sum(failures.values()))
        for kind, n in failures.items():
            calls.add_metric([slug, name, kind], n)
        histogram = [sum(column) for column in zip(*(h.histogram for h in members), strict=True)]
        latency.add_metric(
            [slug, name],
            _buckets(call_stats.BOUNDS_MS, histogram),
            sum(h.duration_ms for h in members) / 1000,
        )
        for state in (breaker.CLOSED, breaker.OPEN, breaker.HALF_OPEN):
            circuits.add_metric([slug, name, state], sum(1 for h in members if h.circuit == state))
        successes = [h.last_success for h in members if h.last_success is not None]
        if successes:
            success.add_metric([slug, name], max(successes))
    yield from (calls, latency, circuits, success)


class PlatformCollector:
    def collect(self) -> Iterator[Any]:
        totals = _bounded(recorder().totals_now())
        requests = CounterMetricFamily(
            "mcp_requests", "MCP requests answered by this process.", labels=["tenant", "method", "outcome"]
        )
        latency = HistogramMetricFamily(
            "mcp_tool_call_duration_seconds", "tools/call latency in this process.", labels=["tenant", "tool"]
        )
        for (slug, method, tool), counts in sorted(totals.items()):
            ok = counts.calls - counts.errors - counts.tool_errors
            for outcome, n in (("ok", ok), ("error", counts.errors), ("tool_error", counts.tool_errors)):
                requests.add_metric([slug, method, outcome], n)
            if method == "tools/call":
                latency.add_metric(
                    [slug, tool], _buckets(LATENCY_BOUNDS_MS, counts.histogram), counts.duration_ms / 1000
                )
        yield requests
        yield latency
        # Counts of every tenant: the scrape is the operator's, across tenants on purpose.
        with wall.bypass("metrics scrape"):
            yield from self._shared()
            yield from _upstream_families(_upstreams_bounded())
        oauth = CounterMetricFamily(
            "mcp_oauth_events", "Authorization server outcomes in this process.", labels=["kind", "outcome"]
        )
        for (kind, outcome), n in sorted(events.snapshot().items()):
            oauth.add_metric([kind, outcome], n)
        yield oauth
        refused = CounterMetricFamily(
            "mcp_limit_refusals",
            "Calls, sessions, runs, streams and request bodies this process refused past a quota or cap.",
            labels=["limit"],
        )
        for limit, n in sorted(quotas.refusals().items()):
            refused.add_metric([limit], n)
        yield refused

    def _shared(self) -> Iterator[Any]:
        tenants = dict(
            Tenant.objects.filter(is_active=True).values_list("pk", "slug")[
                : settings.MCP_METRICS_MAX_TENANTS
            ]
        )
        sessions = GaugeMetricFamily(
            "mcp_open_sessions", "Open legacy sessions (every process).", labels=["tenant"]
        )
        streams = GaugeMetricFamily(
            "mcp_open_listen_streams", "Open subscriptions/listen streams (every process).", labels=["tenant"]
        )
        ids = list(tenants)
        try:
            open_sessions, listeners = live.active_sessions(ids), live.active_listeners(ids)
        except Exception:  # noqa: BLE001 - a scrape must not fail because Redis is away: say nothing
            logger.warning("could not count open sessions and streams", exc_info=True)
            open_sessions, listeners = {}, {}
        for tenant_id, slug in tenants.items():
            if tenant_id in open_sessions:
                sessions.add_metric([slug], open_sessions[tenant_id])
            if tenant_id in listeners:
                streams.add_metric([slug], listeners[tenant_id])
        yield sessions
        yield streams
        runs = GaugeMetricFamily(
            "mcp_background_runs", "Tool runs kept, by status (every process).", labels=["status"]
        )
        by_status = dict(
            ToolRun.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
        )
        for status in ToolRun.Status.values:
            runs.add_metric([status], by_status.get(status, 0))
        yield runs
        if redis_client.enabled() and settings.MCP_BACKGROUND_TOOLS == "celery":
            try:
                depth = redis_client.sync_client().llen(settings.MCP_BACKGROUND_QUEUE)
                alive = presence.alive()
            except Exception:  # noqa: BLE001
                logger.warning("could not read the queue's depth and workers", exc_info=True)
            else:
                yield GaugeMetricFamily(
                    "mcp_background_queue_depth", "Background jobs waiting for a worker.", value=depth
                )
                workers = GaugeMetricFamily(
                    "mcp_background_workers",
                    "Workers taking background jobs from the queue now (0: calls wait, AMB-113).",
                    labels=["queue"],
                )
                workers.add_metric([settings.MCP_BACKGROUND_QUEUE], alive)
                yield workers


_registry = CollectorRegistry(auto_describe=False)
_registry.register(PlatformCollector())


def _allowed(request: HttpRequest) -> bool:
    token = settings.MCP_METRICS_TOKEN
    if token:
        sent = request.headers.get("authorization", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    networks = [ipaddress.ip_network(n, strict=False) for n in settings.MCP_METRICS_ALLOW] or LOOPBACK
    return any(address in network for network in networks)


def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse("Metrics need the metrics token or an allowed address.\n", status=403)
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
