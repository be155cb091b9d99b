"""Our platform as an upstream of itself: one tenant federates another tenant served by a second Daphne
process, and the official SDK client reaches the inner tenant's tools through the outer one.

The inner tenant's endpoint is ours, so our federation client meets our own server in both of its
eras: `mode="auto"` speaks 2026-07-28 to it (no session), `mode="legacy"` opens a 2025-11-25 session.
Each is driven by the SDK client in legacy and auto modes: a template tool's result, and a python tool's
progress relayed from the inner tenant through the outer one to the person's client.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.e2e.helpers import Reports, sdk_client
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ("legacy", "auto")


def federated_tenants(server: DaphneServer, inner_url_of: str, upstream_mode: str) -> tuple[str, str]:
    """An inner tenant with `greet` and `count`, and an outer one publishing both as in_*."""
    inner, outer = f"inner-{secrets.token_hex(3)}", f"outer-{secrets.token_hex(3)}"
    url = inner_url_of.replace("INNER", inner)
    django_shell(
        server.env,
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
        "from tenants.models import Tenant\n"
        f"i = Tenant.objects.create(slug={inner!r}, name={inner!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=i, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'},"
        " input_schema={'type': 'object', 'properties': {'name': {'type': 'string'}}, 'required': ['name']})\n"
        # Its arguments declared: a published upstream tool takes only those (AMB-280).
        "Tool.objects.create(tenant=i, name='count', handler='python', handler_config={'callable': 'count_slowly'},"
        " input_schema={'type': 'object', 'properties': {'n': {'type': 'integer'}, 'delay': {'type': 'number'}}})\n"
        f"o = Tenant.objects.create(slug={outer!r}, name={outer!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=o, name='inner', url={url!r}, prefix='in_', mode={upstream_mode!r}, timeout_seconds=15)\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "for row in UpstreamTool.objects.filter(upstream=up):\n"
        "    service.publish(row)\n",
    )
    return inner, outer


@pytest.mark.parametrize("upstream_mode", ["auto", "legacy"])
async def test_a_tenant_federates_another_tenant_of_a_second_process_in_both_eras(
    server: DaphneServer, server_b: DaphneServer, upstream_mode: str
) -> None:
    _inner, outer = await asyncio.to_thread(
        federated_tenants, server, server_b.mcp_url("INNER"), upstream_mode
    )
    for mode in MODES:
        reports = Reports()
        async with sdk_client(server.mcp_url(outer), mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"in_greet", "in_count"}, (upstream_mode, mode)
            assert tools["in_greet"].input_schema["required"] == ["name"]
            greeted = await client.call_tool("in_greet", {"name": "Ada"})
            counted = await client.call_tool(
                "in_count", {"n": 3, "delay": 0.01}, progress_callback=reports.on_progress
            )
        assert greeted.content[0].text == "Hello, Ada!", (upstream_mode, mode)
        assert counted.content[0].text == "Counted to 3." and counted.structured_content == {"count": 3}
        assert reports.progress == [1, 2, 3], (upstream_mode, mode)


def oauth_federated_tenants(server: DaphneServer, inner_url_of: str, upstream_mode: str) -> dict[str, str]:
    """An OAuth inner tenant with `greet` and a service client acting as its member (AMB-197), and an
    outer public tenant publishing it as in_greet with that client's credentials (AMB-198)."""
    tag = secrets.token_hex(3)
    inner, outer = f"vault-{tag}", f"front-{tag}"
    url = inner_url_of.replace("INNER", inner)
    out = django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\n"
        "from mcp_app.handlers.secrets import encrypt_secrets\n"
        "from mcp_app.models import Tool, Upstream, UpstreamTool\nfrom mcp_app.oauth import service_clients\n"
        "from mcp_app.upstreams import service\nfrom tenants.models import Membership, Tenant\n"
        f"i = Tenant.objects.create(slug={inner!r}, name={inner!r}, auth_mode='oauth')\n"
        f"robot = get_user_model().objects.create_user('robot-{tag}', password='x-{tag}-pw-long')\n"
        "Membership.objects.create(user=robot, tenant=i, role='viewer')\n"
        "Tool.objects.create(tenant=i, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'},"
        " input_schema={'type': 'object', 'properties': {'name': {'type': 'string'}}, 'required': ['name']})\n"
        "made = service_clients.create(i, robot, 'the front tenant', 'mcp:tools')\n"
        f"o = Tenant.objects.create(slug={outer!r}, name={outer!r}, auth_mode='public')\n"
        f"up = Upstream(tenant=o, name='vault', url={url!r}, prefix='in_', mode={upstream_mode!r}, timeout_seconds=15,"
        " oauth_client_id=made.client_id, oauth_client_secret=encrypt_secrets({'client_secret': made.client_secret}))\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "for row in UpstreamTool.objects.filter(upstream=up):\n"
        "    service.publish(row)\n"
        "bad = Upstream(tenant=o, name='wrong', url=up.url, oauth_client_id=made.client_id,"
        " oauth_client_secret=encrypt_secrets({'client_secret': 'not-' + made.client_secret}))\n"
        "bad.full_clean(); bad.save()\n"
        "try:\n    service.discover(bad)\nexcept Exception as exc:\n    print('REFUSED', exc)\n"
        "print('CLIENT', made.client_id)\nprint('SECRET', made.client_secret)\n",
    )
    said = dict(
        line.split(" ", 1)
        for line in out.splitlines()
        if line.split(" ", 1)[0] in ("CLIENT", "SECRET", "REFUSED")
    )
    return {"inner": inner, "outer": outer, **said}


def tokens_of(server: DaphneServer, client_id: str, revoke: bool = False) -> int:
    """How many access tokens the client holds; ``revoke`` deletes them one by one (as revocation does)."""
    out = django_shell(
        server.env,
        "from oauth2_provider.models import AccessToken\n"
        f"rows = list(AccessToken.objects.filter(application__client_id={client_id!r}))\n"
        f"print(len(rows))\nif {revoke!r}:\n    [row.delete() for row in rows]\n",
    )
    return int(out.strip().splitlines()[-1])


@pytest.mark.parametrize("upstream_mode", ["auto", "legacy"])
async def test_an_oauth_tenant_is_federated_with_client_credentials(
    server: DaphneServer, server_b: DaphneServer, upstream_mode: str
) -> None:
    """The outer tenant gets a token by the client credentials grant from the inner platform (found from
    its protected resource metadata), reuses it across calls, and heals when it is revoked. The client's
    scope is the tools' alone: the inner tenant's prompts and resources answer 403, and the sync leaves
    them out instead of failing."""
    setup = await asyncio.to_thread(oauth_federated_tenants, server, server_b.mcp_url("INNER"), upstream_mode)
    # The sync in the shell process took one token.
    assert await asyncio.to_thread(tokens_of, server, setup["CLIENT"]) == 1
    for mode in MODES:
        async with sdk_client(server.mcp_url(setup["outer"]), mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["in_greet"]
            for name in ("Ada", "Grace"):
                greeted = await client.call_tool("in_greet", {"name": name})
                assert greeted.content[0].text == f"Hello, {name}!", (upstream_mode, mode, greeted)
    # One token for every call of the serving process, in both of our eras.
    assert await asyncio.to_thread(tokens_of, server, setup["CLIENT"]) == 2
    await asyncio.to_thread(tokens_of, server, setup["CLIENT"], True)
    async with sdk_client(server.mcp_url(setup["outer"]), "auto") as client:
        greeted = await client.call_tool("in_greet", {"name": "Lin"})
    assert greeted.content[0].text == "Hello, Lin!" and not greeted.is_error
    assert await asyncio.to_thread(tokens_of, server, setup["CLIENT"]) == 1
    # A wrong secret is refused by the inner platform's token endpoint, and said so without the secret.
    refused = setup["REFUSED"]
    assert "refused our client credentials: HTTP 401 (invalid_client)" in refused, refused
    assert setup["SECRET"] not in refused
