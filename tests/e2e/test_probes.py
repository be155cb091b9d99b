"""The probes of a real Daphne on the run's services: live at once, ready with every check answered."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.servers import DaphneServer, ServerProcess

pytestmark = pytest.mark.e2e


def test_a_serving_daphne_is_live_and_ready_with_each_service_answering(
    server: DaphneServer, worker_if_any: ServerProcess | None
) -> None:
    live = httpx.get(f"{server.url}/health/live", timeout=10)
    assert live.status_code == 200 and live.json() == {"status": "live"}
    ready = httpx.get(f"{server.url}/health/ready", headers={"accept": "application/json"}, timeout=10)
    assert ready.status_code == 200, ready.text
    checks = ready.json()
    assert set(checks.values()) == {"OK"}
    # The demo tenant has background tools: with Redis they go to the worker, which answered the ping.
    assert "WorkerAnswers()" in checks and "Migrated(alias='default')" in checks
    page = httpx.get(f"{server.url}/health/ready", headers={"accept": "text/html"}, timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
