"""Probes (mcp_app/health.py): live answers without looking at anything, ready says what is missing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from mcp_app import health
from mcp_app.models import Tool

pytestmark = pytest.mark.django_db


def ready(client: Client) -> tuple[int, dict[str, str]]:
    response = client.get("/health/ready", HTTP_ACCEPT="application/json")
    return response.status_code, response.json()


def test_live_answers_json_to_machines_and_a_page_to_people(client):
    assert client.get("/health/live").json() == {"status": "live"}
    page = client.get("/health/live", HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and b"live" in page.content
    assert "no-cache" in page["Cache-Control"]


def test_ready_on_the_embedded_defaults_reports_each_check_ok(client):
    status, checks = ready(client)
    assert status == 200
    assert len(checks) == 5 and set(checks.values()) == {"OK"}
    assert client.get("/health/ready", HTTP_ACCEPT="text/html").status_code == 200


def test_a_database_with_migrations_to_apply_is_not_ready_and_says_so(client, monkeypatch):
    monkeypatch.setattr(health, "_migrated", set())
    monkeypatch.setattr(health.MigrationExecutor, "migration_plan", lambda self, targets: [("m", False)])
    status, checks = ready(client)
    assert status == 503
    assert "Unavailable: The database has migrations still to apply." in checks.values()


def test_redis_that_does_not_answer_makes_the_process_not_ready(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    status, checks = ready(client)
    assert status == 503
    assert "Unavailable: Redis does not answer." in checks.values()


def test_with_background_tools_on_workers_and_no_worker_answering_the_process_is_not_ready(
    client, tenant_a: Any, settings, monkeypatch
):
    settings.MCP_BACKGROUND_TOOLS = "celery"
    monkeypatch.setattr(health.current_app.control, "ping", lambda timeout, limit: [])
    assert ready(client)[0] == 200  # no background tool anywhere: workers are not needed
    Tool.objects.create(tenant=tenant_a, name="slow", handler="template", execution="background")
    status, checks = ready(client)
    assert status == 503
    assert "Unavailable: No Celery worker answers, and background tools exist." in checks.values()
