"""A tool that acts as the person (AMB-215): an `http` tool whose `connection` names provider `gh` (Daphne B's
authorization server). The person's client (the official SDK, with a member's API key) calls it; they are
asked through URL-mode elicitation to connect, connect in Chromium, and the call completes with their token;
later calls use it, refreshed when it expires; after Disconnect they are asked again. In both eras.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult
from playwright.async_api import Page

from tests.e2e.browser import Screenshots
from tests.e2e.helpers import Upstream
from tests.e2e.servers import DaphneServer, django_shell, manage, used_secret
from tests.e2e.test_browser_connections import (
    connect_in_browser,
    connection_row,
    expire,
    provider_takes,
    setup,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="the refresh lease and the connection's note live in Redis"),
]


def add_tool(server: DaphneServer, names: dict[str, str], upstream: Upstream) -> str:
    """The `whoami` http tool of tenant `acct`, acting as its caller at `gh`; a key of the person."""
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.get(slug={names['acct']!r})\n"
        "tool = Tool(tenant=t, name='whoami', description='Ask gh who I am.', handler='http',"
        f" handler_config={{'url': {upstream.url!r}, 'connection': 'gh'}})\n"
        "tool.full_clean(); tool.save()\n",
    )
    out = manage(server.env, "mcp_key", names["acct"], "--user", names["person"], "--scope", "mcp:tools")
    return used_secret(out.strip().splitlines()[-1])


@asynccontextmanager
async def person_client(
    url: str, key: str, mode: str, **callbacks: Any
) -> AsyncIterator[tuple[Client, list]]:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        notices.append(message)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(120.0))
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            read_timeout_seconds=120.0,
            cache=None,
            message_handler=on_message,
            **callbacks,
        )
        async with client:
            yield client, notices


def sent_token(upstream: Upstream, since: int) -> list[str]:
    """The bearer tokens the tool's endpoint received after the first `since` requests."""
    return [
        request["headers"].get("Authorization", "").removeprefix("Bearer ")
        for request in upstream.requests[since:]
    ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_person_is_asked_to_connect_connects_and_the_call_goes_on_with_their_token(
    server: DaphneServer,
    server_b: DaphneServer,
    upstream: Upstream,
    page: Page,
    mode: str,
    request: pytest.FixtureRequest,
) -> None:
    names = await asyncio.to_thread(setup, server, server_b)
    key = await asyncio.to_thread(add_tool, server, names, upstream)
    shots = Screenshots(request.node.name)
    asked: list[Any] = []

    async def person(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        assert params.mode == "url" and f"/t/{names['acct']}/connections/gh/start?link=" in params.url
        await connect_in_browser(page, params.url, names, shots)
        return ElicitResult(action="accept")

    url = server.mcp_url(names["acct"])
    before = len(upstream.requests)
    async with person_client(url, key, mode, elicitation_callback=person) as (client, notices):
        first = await client.call_tool("whoami", {"note": "hi"})
        assert not first.is_error, first
        assert json.loads(first.content[0].text)["received"] == {"note": "hi"}
        assert len(asked) == 1 and "Connect your Provider B account" in asked[0].message
        row = await asyncio.to_thread(connection_row, server, names)
        assert row is not None and sent_token(upstream, before) == [row["access_token"]]
        assert await asyncio.to_thread(provider_takes, server_b, names, row["access_token"]) == 200
        if mode == "legacy":  # 2025-11-25 says so; 2026-07-28 has no such notification
            completed = [
                n for n in notices if getattr(n, "method", "") == "notifications/elicitation/complete"
            ]
            assert len(completed) == 1, notices

        # Later calls use the connection without asking; an expired token is refreshed first.
        await client.call_tool("whoami", {"note": "again"})
        await asyncio.to_thread(expire, server, names)
        # The expiry is written behind the vault's back (no signal): the serving process trusts the token
        # it handed out for MCP_TOKEN_CACHE_SECONDS (5), as a real expiry could not surprise it.
        await asyncio.sleep(5.5)
        await client.call_tool("whoami", {"note": "refreshed"})
        refreshed = await asyncio.to_thread(connection_row, server, names)
        assert refreshed is not None and refreshed["access_token"] != row["access_token"]
        assert sent_token(upstream, before) == [
            row["access_token"],
            row["access_token"],
            refreshed["access_token"],
        ]
        assert len(asked) == 1
        await client.call_tool("whoami", {"note": "handed out again"})  # the serving process keeps it

        # Disconnected in another process: forgotten here at once (Redis), so the person is asked again;
        # one who declines gets a result that says nothing was done.
        await asyncio.to_thread(
            django_shell,
            server.env,
            "import asyncio\nfrom mcp_app.connected_accounts import vault\nfrom mcp_app.models import Connection\n"
            f"c = Connection.objects.select_related('provider', 'tenant', 'user').get(pk={refreshed['pk']})\n"
            "asyncio.run(vault.disconnect(c))\n",
        )

    async def declines(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="decline")

    async with person_client(url, key, mode, elicitation_callback=declines) as (client, _):
        refused = await client.call_tool("whoami", {"note": "after"})
    assert refused.is_error and "declined connecting their Provider B account" in refused.content[0].text
    assert len(asked) == 2 and len(upstream.requests) == before + 4  # the endpoint never heard of it

    # A client that cannot open links is given the link in the error.
    async with person_client(url, key, mode) as (client, _):
        linkless = await client.call_tool("whoami", {"note": "no links"})
    assert linkless.is_error
    text = linkless.content[0].text
    assert (
        "Open this link in your browser" in text and f"/t/{names['acct']}/connections/gh/start?link=" in text
    )


def federate_as_the_caller(server: DaphneServer, server_b: DaphneServer, names: dict[str, str]) -> None:
    """B's tenant `prov` gets `plan`, which needs `prov:read`; A's `acct` federates it as `b_plan`,
    discovered with a service client of `prov` that has only `mcp:tools`, called as the person through
    provider `gh`, now asking for `prov:read` too. Only the person's token can call it."""
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\n"
        "from mcp_app.handlers.secrets import encrypt_secrets\n"
        "from mcp_app.models import Provider, Tool, Upstream, UpstreamTool\nfrom mcp_app.oauth import service_clients\n"
        "from mcp_app.upstreams import service\nfrom tenants.models import Tenant\n"
        f"n = {names!r}\n"
        "prov, acct = Tenant.objects.get(slug=n['prov']), Tenant.objects.get(slug=n['acct'])\n"
        "person = get_user_model().objects.get(username=n['person'])\n"
        "Tool.objects.create(tenant=prov, name='plan', handler='template', required_scope='prov:read',"
        " handler_config={'text': 'The plan, for your eyes only.'})\n"
        "Provider.objects.filter(tenant=acct, name='gh').update(scopes='mcp:tools prov:read')\n"
        "made = service_clients.create(prov, person, 'discovery by A', 'mcp:tools')\n"
        f"up = Upstream(tenant=acct, name='provb', url={server_b.mcp_url(names['prov'])!r}, prefix='b_',"
        " timeout_seconds=15, connection='gh', oauth_client_id=made.client_id,"
        " oauth_client_secret=encrypt_secrets({'client_secret': made.client_secret}))\n"
        "up.full_clean(); up.save(); service.sync(up)\n"
        "for row in UpstreamTool.objects.filter(upstream=up):\n"
        "    service.publish(row)\n",
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_upstream_server_is_called_as_the_person_who_is_asked_to_connect_first(
    server: DaphneServer, server_b: DaphneServer, page: Page, mode: str, request: pytest.FixtureRequest
) -> None:
    names = await asyncio.to_thread(setup, server, server_b)
    await asyncio.to_thread(federate_as_the_caller, server, server_b, names)
    out = await asyncio.to_thread(
        manage, server.env, "mcp_key", names["acct"], "--user", names["person"], "--scope", "mcp:tools"
    )
    key = used_secret(out.strip().splitlines()[-1])
    shots = Screenshots(request.node.name)
    asked: list[Any] = []

    async def person(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        await connect_in_browser(page, params.url, names, shots)
        return ElicitResult(action="accept")

    async with person_client(server.mcp_url(names["acct"]), key, mode, elicitation_callback=person) as (
        client,
        _,
    ):
        assert "b_plan" in {tool.name for tool in (await client.list_tools()).tools}
        first = await client.call_tool("b_plan", {})
        assert not first.is_error, first
        assert first.content[0].text == "The plan, for your eyes only."
        assert len(asked) == 1 and asked[0].mode == "url"
        again = await client.call_tool("b_plan", {})
        assert again.content[0].text == "The plan, for your eyes only." and len(asked) == 1
