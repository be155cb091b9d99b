"""An upstream's questions reach our client: a published upstream tool that asks (a form, sampling, roots)
called through our real Daphne by the official SDK client, every upstream era × our client's era.

The upstreams are the SDK's own servers (tests/upstreams/servers.py) asking through its resolvers: a
legacy session sends a server-to-client request mid-call, a stateless 2026-07-28 server answers an
InputRequiredResult. Our client answers through its callbacks: on a legacy session a request on the
call's stream, in auto mode (2026-07-28) our own InputRequiredResult rounds.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from mcp import MCPError
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.servers import UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")
ERAS = ("2026-07-28", "legacy")
ASKING = ("ask_name", "summarize", "list_roots", "ask_then_sample")
MISSING_CAPABILITY = -32021


@pytest.fixture(scope="module")
def asking_tenant(
    server: DaphneServer, modern_upstream: UpstreamServer, legacy_upstream: UpstreamServer
) -> str:
    """A tenant publishing the asking tools of the 2026-07-28 upstream as `m_*`, the legacy one's as `l_*`."""
    slug = f"asks-{secrets.token_hex(3)}"
    publish = "".join(
        f"up = Upstream(tenant=tenant, name={prefix!r}, url={url!r}, prefix={prefix + '_'!r}, timeout_seconds=5)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "rows = {r.remote_name: r for r in UpstreamTool.objects.filter(upstream=up)}\n"
        f"for name in {ASKING!r}: service.publish(rows[name])\n"
        for prefix, url in (("m", modern_upstream.url), ("l", legacy_upstream.url))
    )
    django_shell(
        server.env,
        "from mcp_app.models import Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n" + publish,
    )
    return slug


class Person:
    """Our client's callbacks: a person who gives their name, a model that answers, two roots."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(f"form: {params.message}")
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(self, context: Any, params: Any) -> CreateMessageResult:
        self.asked.append(f"sampling: {params.messages[0].content.text}")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="short"), model="m"
        )

    async def roots(self, context: Any) -> ListRootsResult:
        self.asked.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
        }


def prefix(era: str) -> str:
    return "m_" if era == "2026-07-28" else "l_"


def upstream_of(era: str, modern: UpstreamServer, legacy: UpstreamServer) -> UpstreamServer:
    return modern if era == "2026-07-28" else legacy


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("era", ERAS)
async def test_each_question_of_an_upstream_tool_is_answered_by_our_client(
    server: DaphneServer, asking_tenant: str, era: str, mode: str
) -> None:
    person = Person()
    async with sdk_client(server.mcp_url(asking_tenant), mode, **person.callbacks()) as client:
        results = [
            await client.call_tool(f"{prefix(era)}ask_name", {}),
            await client.call_tool(f"{prefix(era)}summarize", {"text": "a long text"}),
            await client.call_tool(f"{prefix(era)}list_roots", {}),
            await client.call_tool(f"{prefix(era)}ask_then_sample", {}),
        ]
    assert [r.content[0].text for r in results] == [
        "Hello, Ada!", "Summary: short", "Roots: file:///work/project", "Poem: short",
    ]  # fmt: skip
    assert not any(r.is_error for r in results)
    # Each question was put to the person once, whatever the rounds took.
    assert person.asked == [
        "form: Who are you?", "sampling: Summarize: a long text", "roots",
        "form: Who are you?", "sampling: A poem for Ada",
    ]  # fmt: skip


async def test_a_2026_upstreams_rounds_are_carried_across_ours_and_a_legacy_upstreams_abandoned_calls_cancelled(
    server: DaphneServer, asking_tenant: str, modern_upstream: UpstreamServer, legacy_upstream: UpstreamServer
) -> None:
    modern_before, legacy_before = modern_upstream.stats(), legacy_upstream.stats()
    async with sdk_client(server.mcp_url(asking_tenant), "auto", **Person().callbacks()) as client:
        for era in ERAS:
            result = await client.call_tool(f"{prefix(era)}ask_then_sample", {})
            assert result.content[0].text == "Poem: short", era
    modern_after, legacy_after = modern_upstream.stats(), legacy_upstream.stats()

    # Three rounds of ours, each continuing the upstream's round: three exchanges, not 1 + 2 + 3.
    assert modern_after["methods"]["tools/call"] - modern_before["methods"]["tools/call"] == 3
    # A legacy upstream cannot continue: its call was made again each round, the abandoned two cancelled.
    assert legacy_after["methods"]["tools/call"] - legacy_before["methods"]["tools/call"] == 3
    cancelled = legacy_after["methods"].get("notifications/cancelled", 0)
    assert cancelled - legacy_before["methods"].get("notifications/cancelled", 0) == 2
    for before, after in ((modern_before, modern_after), (legacy_before, legacy_after)):
        assert after["completed"].count("ask_then_sample") - before["completed"].count("ask_then_sample") == 1


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_without_the_capability_gets_its_eras_error_and_nothing_hangs(
    server: DaphneServer, asking_tenant: str, era: str
) -> None:
    url = server.mcp_url(asking_tenant)
    async with sdk_client(url, "legacy") as client:
        result = await asyncio.wait_for(client.call_tool(f"{prefix(era)}summarize", {"text": "x"}), 30)
    assert result.is_error
    assert "did not declare 'sampling' support" in result.content[0].text
    async with sdk_client(url, "auto") as client:
        with pytest.raises(MCPError) as caught:
            await asyncio.wait_for(client.call_tool(f"{prefix(era)}list_roots", {}), 30)
    assert caught.value.error.code == MISSING_CAPABILITY
    assert caught.value.error.data["requiredCapabilities"] == {"roots": {}}
