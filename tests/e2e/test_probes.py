"""The probes of a real Daphne on the run's services: live at once, ready with every check answered."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def test_a_serving_daphne_is_live_and_ready_with_each_service_answering(
    server: DaphneServer, worker_if_any: ServerProcess | None
) -> None:
    live = httpx.get(f"{server.url}/health/live", timeout=10)
    assert live.status_code == 200 and live.json() == {"status": "live"}
    ready = httpx.get(f"{server.url}/health/ready", headers={"accept": "application/json"}, timeout=10)
    assert ready.status_code == 200, ready.text
    body = ready.json()
    checks = {name: value for name, value in body.items() if not name.startswith("workers")}
    assert {v for k, v in checks.items() if k != "upstreams"} == {"OK"} and "Migrated(alias='default')" in checks
    # With Redis background tools go to the worker, which keeps its presence on the run's queue (AMB-113).
    if worker_if_any is None:
        assert body["workers"] == "inline"
    else:
        assert (body["workers"], body["workers_alive"]) == ("up", 1)
    page = httpx.get(f"{server.url}/health/ready", headers={"accept": "text/html"}, timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]


async def test_a_call_made_with_the_sdk_is_counted_on_the_metrics_of_the_process_that_answered(
    server: DaphneServer,
) -> None:
    def calls_of_add() -> float:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        return sum(
            s.value
            for s in families["mcp_requests"].samples
            if s.name == "mcp_requests_total"
            and s.labels == {"tenant": "demo", "method": "tools/call", "outcome": "ok"}
        )

    before = calls_of_add()
    async with mcp_client(server.mcp_url()) as client:
        for _ in range(3):
            await client.call_tool("add", {"a": 1, "b": 2})
    assert calls_of_add() == before + 3
