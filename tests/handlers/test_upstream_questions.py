"""A published upstream tool's questions in our 2026-07-28 rounds, through the dispatcher in process: their
keys stay apart from the approval question, and the upstream's round rides in our requestState, sealed.

End to end, every era pair through Daphne with the SDK client: tests/e2e/test_upstream_asking.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core import signing

from mcp_app import catalog
from mcp_app.handlers import upstream
from mcp_app.models import UpstreamTool
from mcp_app.protocol import asking
from mcp_app.upstreams import service
from tenants import wall
from tests.protocol.support import result_of
from tests.support import make_ctx
from tests.upstreams.conftest import legacy_upstream, modern_upstream  # noqa: F401
from tests.upstreams.running import make_upstream

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}
APPROVE = {"action": "accept", "content": {}}


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


def publish_ask_name(tenant, url: str) -> None:  # noqa: ANN001
    row = make_upstream(tenant, url, timeout_seconds=5)
    with wall.tenant(tenant.id):
        service.sync(row)
        service.publish(UpstreamTool.objects.get(upstream=row, remote_name="ask_name"), approval="every_time")


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_upstream_questions_take_keys_of_their_own_beside_the_approval(tenant_a, era, request):
    server = request.getfixturevalue("modern_upstream" if era == "2026-07-28" else "legacy_upstream")
    await sync_to_async(publish_ask_name)(tenant_a, server.url)
    catalog.clear_caches()
    ctx = make_ctx(tenant_a, version="2026-07-28", session=None, client_capabilities={"elicitation": {}})
    params: dict[str, Any] = {"name": "docs_ask_name", "arguments": {}}

    approval = await result_of(ctx, "tools/call", params)
    assert list(approval["inputRequests"]) == ["approval"]
    params["requestState"], params["inputResponses"] = approval["requestState"], {"approval": APPROVE}
    question = await result_of(ctx, "tools/call", params)
    (key,) = question["inputRequests"]
    assert key == ("upstream/r1.__main__:want_name" if era == "2026-07-28" else "upstream/q1")
    assert question["inputRequests"][key]["params"]["message"] == "Who are you?"
    carried = signing.loads(question["requestState"], salt=asking.STATE_SALT).get("k", {})
    if era == "2026-07-28":  # the upstream's round, sealed: its state is not for our client to read
        assert set(carried) == {upstream.CARRIED_KEY} and "want_name" not in carried[upstream.CARRIED_KEY]
    else:
        assert carried == {}
    params["requestState"], params["inputResponses"] = question["requestState"], {key: ACCEPT}
    done = await result_of(ctx, "tools/call", params)

    assert done["content"][0]["text"] == "Hello, Ada!"


def test_a_long_upstream_key_is_hashed_to_fit():
    key = upstream.key_of("r1." + "x" * 100)
    assert key.startswith("upstream/") and len(key) <= asking.MAX_KEY_CHARS
    assert key == upstream.key_of("r1." + "x" * 100) != upstream.key_of("r1." + "x" * 99 + "y")
