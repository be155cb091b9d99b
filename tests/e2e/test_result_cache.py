"""Kept results through Daphne with the SDK client (AMB-374, issue 36 §3): an upstream tool whose every
result claims it is public (`_meta.cacheScope`), kept 60 s by its owner. Two API keys are two callers:
each sees its own result again, never the other's, in both eras."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.e2e import oauth_flow
from tests.e2e.servers import DaphneServer, django_shell, manage, used_secret
from tests.e2e.test_api_keys import keyed_client, texts
from tests.upstreams.running import running_upstream

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def publish_kept_counter(server: DaphneServer, url: str, prefix: str) -> str:
    """The secure tenant publishes the upstream's public_counter under `prefix`, its results kept 60 s."""
    django_shell(
        server.env,
        oauth_flow.SETUP_CODE
        + "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"t = Tenant.objects.get(slug={oauth_flow.SECURE_SLUG!r})\n"
        f"up = Upstream(tenant=t, name={prefix!r}, url={url!r}, prefix={prefix + '_'!r}, timeout_seconds=20)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='public_counter'))\n"
        f"tool = Tool.objects.get(tenant=t, name={prefix + '_public_counter'!r})\n"
        "tool.result_cache_seconds = 60; tool.full_clean(); tool.save()\n",
    )
    return f"{prefix}_public_counter"


def key(server: DaphneServer) -> str:
    out = manage(server.env, "mcp_key", oauth_flow.SECURE_SLUG, "--service", "--scope", "mcp:tools")
    return used_secret(out.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_upstreams_public_claim_never_shares_one_callers_kept_result_with_another(
    server: DaphneServer, tmp_path_factory: pytest.TempPathFactory, mode: str
) -> None:
    with running_upstream(tmp_path_factory.mktemp("counter"), stateless=mode == "auto") as remote:
        prefix = f"k{secrets.token_hex(3)}"
        name = await asyncio.to_thread(publish_kept_counter, server, remote.url, prefix)
        first_key, second_key = await asyncio.to_thread(key, server), await asyncio.to_thread(key, server)
        url = server.mcp_url(oauth_flow.SECURE_SLUG)
        async with keyed_client(url, first_key, mode) as first, keyed_client(url, second_key, mode) as second:
            mine = texts(await first.call_tool(name, {"q": "weather"}))
            assert (
                texts(await first.call_tool(name, {"q": "weather"})) == mine
            )  # kept: the upstream not asked
            theirs = texts(await second.call_tool(name, {"q": "weather"}))
            assert theirs != mine, "another caller got the first caller's kept result"
            assert texts(await second.call_tool(name, {"q": "weather"})) == theirs
            assert texts(await first.call_tool(name, {"q": "rain"})) != mine  # other arguments run again
