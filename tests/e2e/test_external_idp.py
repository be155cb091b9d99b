"""The official SDK client calls tools with a token of the tenant's own identity provider, in both eras,
through a real Daphne (AMB-203..206).

The identity provider is tests/oauth/idp_server.py (joserfc under uvicorn, its own process); the
client gets its token there by the client credentials grant, as a program would from Okta or Entra,
with this endpoint as its audience. The token reaches no tool: the `http` tool's endpoint records what
it was sent.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS, Upstream
from tests.e2e.servers import DaphneServer, django_shell, start_daphne
from tests.oauth.idp_support import IdentityProvider, running_identity_provider

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

SCOPES = "mcp:tools mcp:prompts mcp:resources"


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_identity_provider() as provider:
        yield provider


@pytest.fixture(scope="module")
def idp_daphne(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    env = {**e2e_env, "MCP_IDENTITY_ALLOW_HTTP_LOOPBACK": "1"}
    daphne = start_daphne("daphne-idp", env, tmp_path_factory.mktemp("daphne-idp"))
    yield daphne
    daphne.stop()


@pytest.fixture(scope="module")
def slug(idp_daphne: DaphneServer, idp: IdentityProvider, upstream: Upstream) -> str:
    """An oauth tenant taking the provider's JWTs for its own endpoint URL; tools echo, fetch, payroll."""
    name = f"idp-{secrets.token_hex(3)}"
    identity = {"issuer": idp.url, "jwks_uri": idp.jwks_uri, "audience": idp_daphne.mcp_url(name)}
    django_shell(
        idp_daphne.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant(slug={name!r}, name={name!r}, auth_mode='oauth', identity={identity!r})\n"
        "tenant.full_clean()\ntenant.save()\n"
        "Tool.objects.create(tenant=tenant, name='echo', handler='python', handler_config={'callable': 'echo'},"
        " input_schema={'type': 'object', 'properties': {'message': {'type': 'string'}}})\n"
        f"Tool.objects.create(tenant=tenant, name='fetch', handler='http', handler_config={{'url': {upstream.url!r}}},"
        " input_schema={'type': 'object', 'properties': {}, 'additionalProperties': True})\n"
        "Tool.objects.create(tenant=tenant, name='payroll', handler='template', handler_config={'text': 'salaries'},"
        " required_scope='payroll:read')\n",
    )
    return name


def sdk(url: str, token: str, mode: str) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(REQUEST_SECONDS, read=120.0)
    )
    client = Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        read_timeout_seconds=REQUEST_SECONDS,
        cache=None,
    )
    return client, http


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_calls_tools_with_the_identity_providers_token_in_both_eras(
    idp_daphne: DaphneServer, idp: IdentityProvider, slug: str, upstream: Upstream, mode: str
) -> None:
    url = idp_daphne.mcp_url(slug)
    token = idp.token(url, SCOPES, subject=f"user-{mode}")
    client, http = sdk(url, token, mode)
    async with http, client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["echo", "fetch", "payroll"]
        result = await client.call_tool("echo", {"message": f"hi {mode}"})
        assert result.content[0].text == f"hi {mode}"  # type: ignore[union-attr]
        before = len(upstream.requests)
        fetched = await client.call_tool("fetch", {"mode": mode})
        assert not fetched.is_error
    sent = upstream.requests[before:]
    assert sent and all(token not in str(request) for request in sent)  # the token went nowhere


def post(url: str, token: str, body: dict) -> httpx.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(url, json=body, headers=headers, timeout=REQUEST_SECONDS)


def test_refusals_and_step_up_over_http(idp_daphne: DaphneServer, idp: IdentityProvider, slug: str) -> None:
    url = idp_daphne.mcp_url(slug)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}
    # A token for another endpoint of the same provider.
    refused = post(url, idp.token(idp_daphne.mcp_url("demo"), SCOPES), initialize)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert "audience (aud) is not this endpoint" in refused.text
    # A tool's own scope: 403 insufficient_scope naming it, on the stateless era.
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "payroll",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "payroll"}
    headers = {**MCP_HEADERS, **modern, "Authorization": f"Bearer {idp.token(url, SCOPES)}"}
    stepped = httpx.post(url, json=call, headers=headers, timeout=REQUEST_SECONDS)
    assert stepped.status_code == 403
    assert 'error="insufficient_scope"' in stepped.headers["www-authenticate"]
    headers["Authorization"] = f"Bearer {idp.token(url, SCOPES + ' payroll:read')}"
    allowed = httpx.post(url, json=call, headers=headers, timeout=REQUEST_SECONDS)
    assert allowed.status_code == 200 and "salaries" in allowed.text
    # The metadata sends clients to the provider.
    metadata = httpx.get(
        f"{idp_daphne.url}/.well-known/oauth-protected-resource/t/{slug}/mcp", timeout=REQUEST_SECONDS
    )
    assert metadata.json()["authorization_servers"] == [idp.url]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_policy_reads_the_identity_providers_claims_for_the_sdk_client(
    idp_daphne: DaphneServer, idp: IdentityProvider, mode: str
) -> None:
    """`caller.claims` (AMB-359): the verified token's own claims decide. A person in the provider's
    `finance` group lists and calls `salaries`; one in `sales` lists only `echo` and is answered as
    for a tool that does not exist."""
    name = f"claims-{secrets.token_hex(3)}"
    url = idp_daphne.mcp_url(name)
    identity = {"issuer": idp.url, "jwks_uri": idp.jwks_uri, "audience": url}
    django_shell(
        idp_daphne.env,
        "from mcp_app.models import Policy, Tool\nfrom tenants.models import Tenant\n"
        f"tenant = Tenant(slug={name!r}, name={name!r}, auth_mode='oauth', identity={identity!r})\n"
        "tenant.full_clean()\ntenant.save()\n"
        "for tool in ('echo', 'salaries'):\n"
        "    Tool.objects.create(tenant=tenant, name=tool, handler='template', handler_config={'text': tool})\n"
        "p = Policy(tenant=tenant, name='salaries-for-finance', condition=\"target.name == 'salaries' && "
        "!(has(caller.claims.groups) && 'finance' in caller.claims.groups)\")\n"
        "p.full_clean()\np.save()\n",
    )
    for groups, listed in ((["staff", "finance"], ["echo", "salaries"]), (["sales"], ["echo"])):
        claims = idp.claims(url, sub=f"{groups[-1]}-{mode}", scope=SCOPES, groups=groups)
        client, http = sdk(url, idp.mint(claims), mode)
        async with http, client:
            assert [tool.name for tool in (await client.list_tools()).tools] == listed
            if "salaries" in listed:
                result = await client.call_tool("salaries", {})
                assert result.content[0].text == "salaries"  # type: ignore[union-attr]
            else:
                with pytest.raises(MCPError, match="Unknown tool: salaries"):
                    await client.call_tool("salaries", {})
