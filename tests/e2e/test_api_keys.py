"""A CI job calls tools with an API key (AMB-202): minted by `manage.py mcp_key`, sent by the official SDK
client as `Authorization: Bearer` to a real Daphne in both eras; per-tool scopes, revocation, the address
allow-list and a key in the URL answered exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Page

from mcp_app.connect.configs import client_configs
from tests.e2e import oauth_flow
from tests.e2e.admin_pages import body_text
from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell, manage, used_secret

pytestmark = pytest.mark.e2e

SLUG = oauth_flow.SECURE_SLUG


def mint(server: DaphneServer, *args: str) -> str:
    django_shell(server.env, oauth_flow.SETUP_CODE)
    out = manage(server.env, "mcp_key", SLUG, *args)
    return used_secret(out.strip().splitlines()[-1])


@asynccontextmanager
async def keyed_client(url: str, key: str, mode: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(REQUEST_SECONDS, read=60.0)
    )
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            read_timeout_seconds=REQUEST_SECONDS,
            cache=None,
        )
        async with client:
            yield client


def texts(result) -> list[str]:
    return [block.text for block in result.content]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_ci_job_calls_tools_with_a_key_in_both_eras(server: DaphneServer, mode: str) -> None:
    key = mint(server, "--user", oauth_flow.SECURE_USER, "--scope", "mcp:tools", "--scope", "secure:vault")
    url = server.mcp_url(SLUG)
    async with keyed_client(url, key, mode) as client:
        assert {"say_hello", "read_vault"} <= {tool.name for tool in (await client.list_tools()).tools}
        assert texts(await client.call_tool("say_hello", {"name": "CI"})) == [
            "Hello from the secure server, CI!"
        ]
        vault = await client.call_tool("read_vault", {})
        assert texts(vault) == ["The vault says: keep your tokens audience-bound."]


async def test_a_key_without_a_tools_scope_is_stepped_up_and_a_revoked_one_refused(
    server: DaphneServer,
) -> None:
    key = mint(server, "--service", "--scope", "mcp:tools")
    url = server.mcp_url(SLUG)
    async with keyed_client(url, key, "auto") as client:
        assert texts(await client.call_tool("say_hello", {"name": "bot"})) == [
            "Hello from the secure server, bot!"
        ]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_vault", "arguments": {}},
    }
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    session = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS},
        headers=headers,
        timeout=REQUEST_SECONDS,
    )
    assert session.status_code == 200, session.text
    headers["Mcp-Session-Id"] = session.headers["mcp-session-id"]
    stepped = httpx.post(url, json=call, headers=headers, timeout=REQUEST_SECONDS)
    assert stepped.status_code == 403 and "secure:vault" in stepped.text
    assert 'error="insufficient_scope"' in stepped.headers["www-authenticate"]
    prefix = key[:13]
    django_shell(
        server.env,
        f"from tenants.models import ApiKey\nfrom mcp_app.oauth import api_keys\n"
        f"api_keys.revoke(ApiKey.objects.get(prefix={prefix!r}))",
    )
    refused = httpx.post(url, json=call, headers=headers, timeout=REQUEST_SECONDS)
    assert refused.status_code == 401 and "unknown, revoked or malformed" in refused.text


async def test_a_key_from_another_address_or_in_the_url_is_refused(server: DaphneServer) -> None:
    fenced = mint(server, "--service", "--allow", "10.0.0.0/8")
    url = server.mcp_url(SLUG)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}
    refused = httpx.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {fenced}"})
    assert refused.status_code == 401 and "may not be used from this address" in refused.text
    near = mint(server, "--service", "--allow", "127.0.0.0/8")
    assert (
        httpx.post(url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {near}"}).status_code
        == 200
    )
    in_url = httpx.post(f"{url}?api_key={near}", json=body, headers=MCP_HEADERS)
    assert in_url.status_code == 400 and "not accepted in the query string" in in_url.text


async def test_an_owner_mints_a_key_in_the_browser_and_revokes_it(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    django_shell(server.env, oauth_flow.SETUP_CODE)
    shots = Screenshots(request.node.name)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, ADMIN_USERNAME, ADMIN_PASSWORD)
    await page.goto(f"{server.url}/admin/tenants/apikey/add/")
    await page.select_option("#id_tenant", label=SLUG)
    await page.fill("#id_name", "browser CI")
    await page.fill("#id_scope", "mcp:tools secure:vault")
    await page.fill("#id_days", "2")
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    key = used_secret((await page.inner_text("#api-key")).strip())
    await shots.take(page, "minted")
    assert key.startswith("mcpk_")
    async with keyed_client(server.mcp_url(SLUG), key, "auto") as client:
        vault = await client.call_tool("read_vault", {})
        assert texts(vault) == ["The vault says: keep your tokens audience-bound."]

    await page.goto(f"{server.url}/admin/tenants/apikey/")
    row = page.locator("tr", has_text=key[:13])
    await row.locator("input[name=_selected_action]").check()
    await page.select_option("select[name=action]", "revoke_keys")
    async with page.expect_navigation():
        await page.click("button[name=index]")
    assert "Revoked 1 API key(s)" in await body_text(page)
    assert "revoked" in await row.inner_text()
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}
    refused = httpx.post(
        server.mcp_url(SLUG), json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    )
    assert refused.status_code == 401


def test_the_connect_pages_ci_script_lists_the_tools_with_a_key(server: DaphneServer, tmp_path: Path) -> None:
    key = mint(server, "--user", oauth_flow.SECURE_USER, "--scope", "mcp:tools")
    config = next(c for c in client_configs(SLUG, server.mcp_url(SLUG), True) if c.key == "api-key")
    script = tmp_path / "ci.py"
    script.write_text(config.text)
    ran = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "MCP_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "say_hello: Greet someone from the secure server." in ran.stdout
