"""Ready-to-paste client configurations of one tenant's MCP endpoint (the connect page shows them).

Each entry follows its client's documented format, checked when written (AMB-63): Claude Code's
`claude mcp add --transport http`, Claude Desktop's custom connector (remote servers are added in
its settings, not its JSON file; the file only starts local commands, hence the mcp-remote bridge),
VS Code's `.vscode/mcp.json` (`servers`, `"type": "http"`), Cursor's `~/.cursor/mcp.json`
(`mcpServers` with a `url`), the MCP Inspector (`npx @modelcontextprotocol/inspector`, its CLI with
`--transport http`), and a script for the official Python SDK (`pip install mcp`, 2.x `Client`).
Pure functions of the URL, a server name and the auth mode: tests check every one names the URL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientConfig:
    key: str  # the element id on the page
    client: str
    where: str  # where the text goes, in words
    text: str
    language: str  # shell, json or python
    note: str = ""


def _json(value: object) -> str:
    return json.dumps(value, indent=2)


PUBLIC_SCRIPT = '''"""List the tools of {name} with the official MCP Python SDK (pip install mcp)."""

import asyncio

from mcp import Client

URL = "{url}"


async def main() -> None:
    # A URL means the Streamable HTTP transport; the SDK negotiates the protocol revision.
    async with Client(URL) as client:
        for tool in (await client.list_tools()).tools:
            print(f"{{tool.name}}: {{tool.description}}")


asyncio.run(main())
'''

OAUTH_SCRIPT = '''"""List the tools of {name} with the official MCP Python SDK (pip install mcp), signing in with OAuth.

The SDK finds the authorization server from the endpoint's 401, registers itself, and sends you to
your browser to sign in and press Allow; the redirect comes back to a listener on 127.0.0.1.
"""

import asyncio
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

URL = "{url}"
PORT = 33418  # any free local port
REDIRECT_URI = f"http://127.0.0.1:{{PORT}}/callback"
received: dict[str, str] = {{}}


class Redirect(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        received.update({{k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"Signed in: you can close this tab.")

    def log_message(self, *args: object) -> None:
        pass


listener = HTTPServer(("127.0.0.1", PORT), Redirect)


class Memory:
    """Where the SDK keeps its registration and tokens (here in memory: sign in again next run)."""

    tokens = client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


async def open_browser(url: str) -> None:
    print("Sign in in your browser:", url)
    webbrowser.open(url)


async def wait_for_redirect() -> AuthorizationCodeResult:
    await asyncio.to_thread(listener.handle_request)
    return AuthorizationCodeResult(
        code=received["code"], state=received.get("state"), iss=received.get("iss")
    )


async def main() -> None:
    auth = OAuthClientProvider(
        server_url=URL,
        client_metadata=OAuthClientMetadata(
            client_name="My MCP script",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=open_browser,
        callback_handler=wait_for_redirect,
    )
    async with httpx2.AsyncClient(auth=auth) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            for tool in (await client.list_tools()).tools:
                print(f"{{tool.name}}: {{tool.description}}")


asyncio.run(main())
'''


KEY_SCRIPT = '''"""Call {name} from a CI job or a server with an API key (pip install mcp); no browser needed.

The key is read from the MCP_API_KEY environment variable (a CI secret), never written in the script.
"""

import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = "{url}"


async def main() -> None:
    headers = {{"Authorization": f"Bearer {{os.environ['MCP_API_KEY']}}"}}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            for tool in (await client.list_tools()).tools:
                print(f"{{tool.name}}: {{tool.description}}")


asyncio.run(main())
'''


def python_script(name: str, url: str, oauth: bool) -> str:
    return (OAUTH_SCRIPT if oauth else PUBLIC_SCRIPT).format(name=name, url=url)


def client_configs(name: str, url: str, oauth: bool, issuer: str = "") -> list[ClientConfig]:
    """Every client's configuration for the endpoint `url`, its server called `name`; `issuer`: the
    tenant's own identity provider, where its users sign in (AMB-203)."""
    where = f"at your identity provider ({issuer})" if issuer else "with your account here and press Allow"
    sign_in = f"The first call opens your browser: sign in {where}." if oauth else ""
    return [
        ClientConfig(
            "claude-code",
            "Claude Code",
            "Run in a terminal (add --scope user to have it in every project, --scope project to share "
            "it in .mcp.json).",
            f"claude mcp add --transport http {name} {url}",
            "shell",
            "Then run /mcp in Claude Code and choose the server to sign in." if oauth else "",
        ),
        ClientConfig(
            "claude-desktop",
            "Claude Desktop and claude.ai",
            "Settings → Connectors → Add custom connector: give it a name and paste this URL "
            "(the server must be reachable from the internet over HTTPS).",
            url,
            "text",
            sign_in or "No sign-in: the endpoint is public.",
        ),
        ClientConfig(
            "claude-desktop-bridge",
            "Claude Desktop through a local bridge",
            "claude_desktop_config.json (Settings → Developer → Edit Config): for a server only your "
            "machine reaches; Claude Desktop starts mcp-remote, which needs Node.js.",
            _json({"mcpServers": {name: {"command": "npx", "args": ["-y", "mcp-remote", url]}}}),
            "json",
            sign_in,
        ),
        ClientConfig(
            "vscode",
            "VS Code (GitHub Copilot agent mode)",
            "Save as .vscode/mcp.json in your workspace (or run “MCP: Open User Configuration” for "
            "every workspace), then press Start above the server.",
            _json({"servers": {name: {"type": "http", "url": url}}}),
            "json",
            sign_in,
        ),
        ClientConfig(
            "cursor",
            "Cursor",
            "Add to ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project), then turn "
            "the server on in Cursor's MCP settings.",
            _json({"mcpServers": {name: {"url": url}}}),
            "json",
            sign_in,
        ),
        ClientConfig(
            "inspector",
            "MCP Inspector",
            "Run in a terminal: it opens the Inspector in your browser; choose Transport "
            "“Streamable HTTP”, paste the URL and press Connect.",
            "npx @modelcontextprotocol/inspector",
            "shell",
            "" if not oauth else "The Inspector's OAuth settings run the sign-in when you connect.",
        ),
        ClientConfig(
            "inspector-cli",
            "MCP Inspector, command line",
            "Run in a terminal: lists the tools as JSON and exits.",
            f"npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list",
            "shell",
            "It prints the sign-in URL to open." if oauth else "",
        ),
        ClientConfig(
            "python",
            "Python SDK",
            "Save as connect.py, then: pip install mcp && python connect.py",
            python_script(name, url, oauth),
            "python",
        ),
        *([_api_key_config(name, url)] if oauth else []),
    ]


def _api_key_config(name: str, url: str) -> ClientConfig:
    """A client with no browser (a CI job, an agent on a server) sends an API key (AMB-202)."""
    return ClientConfig(
        "api-key",
        "A CI job or a server (API key)",
        "Save as ci.py and set MCP_API_KEY to a key an owner minted (the admin's API keys, or "
        f"manage.py mcp_key {name} --user <you>), then: pip install mcp && python ci.py",
        KEY_SCRIPT.format(name=name, url=url),
        "python",
        "The key is sent as Authorization: Bearer, never in the URL; Claude Code takes it too: "
        f'claude mcp add --transport http {name} {url} --header "Authorization: Bearer $MCP_API_KEY"',
    )
