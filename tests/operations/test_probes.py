"""Probes (mcp_app/operations/probes.py): live answers without looking at anything, ready says what is missing."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from mcp_app.background import presence
from mcp_app.federation import UpstreamUnavailable, breaker, call_stats
from mcp_app.infra import redis_client
from mcp_app.models import Tool
from mcp_app.operations import probes
from tests.upstreams.running import call_row, kill_until_open, make_upstream, running_upstream

pytestmark = pytest.mark.django_db


def ready(client: Client) -> tuple[int, dict[str, Any]]:
    response = client.get("/health/ready", HTTP_ACCEPT="application/json")
    return response.status_code, response.json()


def checks_of(body: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in body.items() if not name.startswith(("workers", "upstreams"))}


def test_live_answers_json_to_machines_and_a_page_to_people(client):
    assert client.get("/health/live").json() == {"status": "live"}
    page = client.get("/health/live", HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and b"live" in page.content
    assert "no-cache" in page["Cache-Control"]


def test_ready_reports_each_check_ok_and_no_workers_to_count_when_tools_run_in_process(client, settings):
    settings.MCP_BACKGROUND_TOOLS = "inline"  # the embedded defaults' choice
    status, body = ready(client)
    assert status == 200
    assert body["workers"] == "inline"  # background tools run in this process: no workers to count
    assert len(checks_of(body)) == 4 and set(checks_of(body).values()) == {"OK"}
    assert client.get("/health/ready", HTTP_ACCEPT="text/html").status_code == 200


def test_a_database_with_migrations_to_apply_is_not_ready_and_says_so(client, monkeypatch):
    monkeypatch.setattr(probes, "_migrated", set())
    monkeypatch.setattr(probes.MigrationExecutor, "migration_plan", lambda self, targets: [("m", False)])
    status, checks = ready(client)
    assert status == 503
    assert "Unavailable: The database has migrations still to apply." in checks.values()


def test_redis_that_does_not_answer_makes_the_process_not_ready(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    status, checks = ready(client)
    assert status == 503
    assert "Unavailable: Redis does not answer." in checks.values()


@pytest.fixture
def workers_queue(settings) -> str:
    """Background tools go to Celery, on a queue of this test's own that no worker process takes."""
    settings.MCP_BACKGROUND_TOOLS = "celery"
    settings.MCP_BACKGROUND_QUEUE = f"mcp-ready-{secrets.token_hex(4)}"
    return settings.MCP_BACKGROUND_QUEUE


@pytest.mark.services
def test_with_no_worker_alive_the_process_stays_ready_and_reports_the_workers_down(
    client, tenant_a: Any, workers_queue: str
):
    # AMB-113: a worker outage is reported, never a reason to take every web process out of service.
    Tool.objects.create(tenant=tenant_a, name="slow", handler="template", execution="background")
    status, body = ready(client)
    assert status == 200, body
    assert (body["workers"], body["workers_alive"]) == ("down", 0)
    assert set(checks_of(body).values()) == {"OK"}
    presence.beat("w1@host", [workers_queue])
    presence.beat("w2@host", [workers_queue, "another-queue"])
    status, body = ready(client)
    assert (status, body["workers"], body["workers_alive"]) == (200, "up", 2)
    text = client.get("/health/ready", {"format": "text"}).content.decode()
    assert "workers: up\nworkers_alive: 2\n" in text
    page = client.get("/health/ready", HTTP_ACCEPT="text/html").content.decode()
    assert "Background workers: up (2 taking jobs)." in page
    presence.leave("w1@host", [workers_queue])  # a warm shutdown begins
    presence.leave("w2@host", [workers_queue, "another-queue"])
    status, body = ready(client)
    assert (status, body["workers"], body["workers_alive"]) == (200, "down", 0)


@pytest.mark.services
def test_a_worker_of_another_queue_or_one_that_stopped_beating_is_not_counted(workers_queue: str):
    presence.beat("elsewhere@host", ["another-queue"])
    # A killed worker's presence: its last beat ran out (scored in the past).
    redis_client.sync_client().zadd(presence.key(workers_queue), {"killed@host": time.time() - 1})
    assert presence.alive() == 0
    presence.beat("alive@host", [workers_queue])
    assert presence.alive() == 1
    presence.leave("elsewhere@host", ["another-queue"])


@pytest.fixture
def fresh_upstreams(settings) -> Iterator[None]:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_UPSTREAM_BREAKER_FAILURES = 2
    settings.MCP_UPSTREAM_BREAKER_SECONDS = 60
    breaker.reset()
    call_stats.reset()
    yield
    breaker.reset()
    call_stats.reset()


def test_a_killed_upstream_with_its_circuit_open_is_reported_and_never_makes_the_process_unready(
    client, settings, tenant_a, tmp_path, fresh_upstreams
):
    # AMB-174: a tenant's upstream going down must not take the platform out of the load balancer.
    settings.MCP_BACKGROUND_TOOLS = "inline"
    assert ready(client)[1]["upstreams"] == {"seen": 0, "open": 0, "half_open": 0}
    with running_upstream(tmp_path) as server:
        row = make_upstream(tenant_a, server.url)
        kill_until_open(server, row, 2)
    assert isinstance(call_row(row, "echo", {"message": "refused"}), UpstreamUnavailable)

    status, body = ready(client)
    assert status == 200, body
    assert body["upstreams"] == {"seen": 1, "open": 1, "half_open": 0}
    assert set(checks_of(body).values()) == {"OK"}
    text = client.get("/health/ready", {"format": "text"}).content.decode()
    assert "upstreams_seen: 1\nupstreams_open: 1\n" in text
    page = client.get("/health/ready", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert "circuits open: 1, half-open: 0" in page.content.decode()
    assert "docs" not in text and str(server.port) not in text  # counts only: the probe is unauthenticated
