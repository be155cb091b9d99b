"""An upstream's prompts, resources and templates end to end (AMB-190..194): a tenant publishes them under
its prefix, and the official SDK client lists, gets and reads them through our real Daphne.

Two pairs of eras: a legacy (session) upstream with a client in auto mode (2026-07-28 with us), and a
stateless 2026-07-28 upstream with a legacy client. Set-up goes through the service in a `manage.py
shell`, as an owner's admin would. The other tenant sees none of them; the rest (review, failures,
completion) is in tests/upstreams/test_extras_review.py, in-process.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import MCPError

from tests.e2e.helpers import sdk_client
from tests.e2e.servers import DaphneServer, django_shell
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import CARD_HTML, README_TEXT, UpstreamServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
README = "docs://docs_/readme"
CARD = "ui://docs_/widgets/card.html"

# (upstream options, our client's mode)
PAIRS = {
    "legacy-upstream-auto-client": ({"stateless": False, "legacy_only": True}, "auto"),
    "stateless-upstream-legacy-client": ({"stateless": True}, "legacy"),
}


@pytest.fixture(params=list(PAIRS))
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[UpstreamServer, str]]:
    options, mode = PAIRS[request.param]
    with running_upstream(tmp_path, **options) as remote:
        yield remote, mode


def publishing_tenant(env: dict[str, str], url: str) -> tuple[str, str]:
    """A tenant publishing the upstream's prompts, resources and its show_card tool; another with nothing."""
    slug, other = f"ext-{secrets.token_hex(3)}", f"charlie-{secrets.token_hex(3)}"
    django_shell(
        env,
        "from mcp_app.models import Upstream, UpstreamTool\n"
        "from mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"Tenant.objects.create(slug={other!r}, name={other!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=tenant, name='docs', url={url!r}, prefix='docs_', timeout_seconds=5,\n"
        "              publish_prompts=True, publish_resources=True)\n"
        "up.full_clean(); up.save()\n"
        "service.sync(up)\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='show_card'))\n",
    )
    return slug, other


async def test_prompts_resources_and_templates_are_listed_got_and_read_under_the_prefix(
    server: DaphneServer, e2e_env: dict[str, str], pair: tuple[UpstreamServer, str]
) -> None:
    remote, mode = pair
    slug, other = await asyncio.to_thread(publishing_tenant, e2e_env, remote.url)
    async with sdk_client(server.mcp_url(slug), mode) as client:
        prompts = (await client.list_prompts()).prompts
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        tools = {t.name: t for t in (await client.list_tools()).tools}
        got = await client.get_prompt("docs_greet", {"name": "Ada"})
        readme = await client.read_resource(README)
        page = await client.read_resource("docs://docs_/pages/usage")
        card = await client.read_resource(CARD)
    assert [p.name for p in prompts] == ["docs_greet"]
    assert resources == {README, CARD} and templates == ["docs://docs_/pages/{page}"]
    assert tools["docs_show_card"].meta["ui"]["resourceUri"] == CARD
    assert got.messages[0].content.text == "Say hello to Ada."
    assert str(got.messages[1].content.resource.uri) == README
    assert str(readme.contents[0].uri) == README and readme.contents[0].text == README_TEXT
    assert page.contents[0].text == "Page usage." and str(page.contents[0].uri) == "docs://docs_/pages/usage"
    assert card.contents[0].text == CARD_HTML and str(card.contents[0].uri) == CARD

    async with sdk_client(server.mcp_url(other), mode) as client:
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
        with pytest.raises(MCPError) as refused:
            await client.read_resource(README)
    assert refused.value.error.message == f"Resource not found: {README}"
