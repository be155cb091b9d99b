"""Fixtures for handler tests: a request context for tenant_a, its resources, and local HTTP servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from mcp_app.core.context import RequestContext
from mcp_app.models import Resource
from tests.handlers.support import (
    PNG,
    WAV,
    QuietServer,
    Recorder,
    Upstream,
    handler_class,
)
from tests.support import make_ctx


@pytest.fixture(autouse=True)
async def _close_worker_connections() -> Any:
    yield
    # The catalog loads through database_sync_to_async, whose worker thread keeps its own
    # connection; left open, PostgreSQL refuses to drop the test database at the end.
    await sync_to_async(connections.close_all)()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def ctx(tenant_a, recorder) -> RequestContext:
    return make_ctx(tenant_a, "2025-06-18", emit=recorder, progress_token="tok-1", log_level="debug")


@pytest.fixture
def resources_a(transactional_db, tenant_a) -> dict[str, Resource]:
    readme = Resource.objects.create(
        tenant=tenant_a,
        uri="demo://readme",
        name="readme",
        title="Read me",
        description="How to use the demo",
        mime_type="text/markdown",
        text="# Demo\nHello.",
        annotations={"audience": ["user"], "priority": 0.5},
    )
    logo = Resource.objects.create(
        tenant=tenant_a, uri="demo://logo.png", name="logo", mime_type="image/png", blob=PNG
    )
    sound = Resource.objects.create(
        tenant=tenant_a, uri="demo://beep.wav", name="beep", mime_type="audio/wav", blob=WAV
    )
    return {"readme": readme, "logo": logo, "sound": sound}


@pytest.fixture
def upstream_factory() -> Iterator[Any]:
    servers: list[QuietServer] = []

    def start() -> Upstream:
        upstream = Upstream(base="", port=0)
        server = QuietServer(("127.0.0.1", 0), handler_class(upstream))
        upstream.port = server.server_address[1]
        upstream.base = f"http://127.0.0.1:{upstream.port}"
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return upstream

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def upstream(upstream_factory) -> Upstream:
    return upstream_factory()


@pytest.fixture
def allow_local(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_HTTP_HANDLER_MAX_RESPONSE_BYTES = 16 * 1024
