"""The transport tests' tenant with tools, their per-test cleanup, and a clean recorder."""

import pytest
import redis
from django.conf import settings

from mcp_app.usage import recorder as usage
from tests.transport.conftest import clean_transport_state, tools_a  # noqa: F401


@pytest.fixture(autouse=True)
def fresh_recorder():
    """The process's recorder, emptied (earlier tests' requests were counted too); Redis usage keys dropped."""
    rec = usage.recorder()
    rec.take()
    rec.listeners.clear()
    if settings.REDIS_URL:
        client = redis.Redis.from_url(settings.REDIS_URL)
        keys = list(client.scan_iter("mcp:usage:*"))
        if keys:
            client.delete(*keys)
        client.close()
    return rec
