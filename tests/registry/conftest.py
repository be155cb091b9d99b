"""Registries for the tests of using one: this platform itself (live_server) and a hostile one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenants.models import Tenant
from tests.registry import hostile


@pytest.fixture(autouse=True)
def _reads_unlimited(settings) -> None:
    # These tests read the registry from one address many times a minute; its limit has its own test.
    settings.MCP_REGISTRY_READS_PER_MINUTE = 0


@pytest.fixture
def platform_registry(live_server, settings) -> str:
    """This platform, serving the registry API on 127.0.0.1, with two listed tenants and one unlisted."""
    settings.MCP_PUBLIC_URL = f"http://127.0.0.1:{live_server.thread.port}"
    settings.MCP_REGISTRY_NAMESPACE = ""
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    Tenant.objects.create(slug="weather", name="Weather", registry_listed=True)
    Tenant.objects.create(slug="weather-notes", name="Notes", registry_listed=True, auth_mode="public")
    Tenant.objects.create(slug="weather-secret", name="Secret")
    return settings.MCP_PUBLIC_URL


@pytest.fixture
def evil(settings) -> Iterator[str]:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    with hostile.hostile_registry() as url:
        yield url
