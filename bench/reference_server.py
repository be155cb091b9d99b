"""Serve the reference `echo` tool with the official `mcp` SDK (MCPServer) over Streamable HTTP.

Usage: python bench/reference_server.py --port 9001 [--json-response] [--stateless] [--extra-tools N]

`--stateless` builds the app with `stateless_http=True`: no sessions. In SDK 2.3 the same app
answers 2026-07-28 requests whatever that flag says: the session manager routes by the
MCP-Protocol-Version header alone (a value that is not a handshake-era version goes to
`mcp.server._streamable_http_modern.handle_modern_request`), so a modern POST needs that header
(and, like ours, Mcp-Method / Mcp-Name mirroring the body, and the `_meta` envelope).

The tool has the same input and output schema as the demo tenant's `echo` and returns the
same result (one text block plus structuredContent {"echo": message}), so both servers
do the same work per call.
"""

from __future__ import annotations

import argparse
from typing import Annotated, TypedDict

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent


class EchoOut(TypedDict):
    """Structured output of `echo`, matching the demo tenant's output schema."""

    echo: str


class AddOut(TypedDict):
    """Structured output of `add`."""

    sum: int


def build_app(json_response: bool, port: int, stateless: bool = False, extra_tools: int = 0):  # noqa: ANN201
    """Build the SDK's Starlette app: stateful (or stateless) sessions, SSE or JSON responses."""
    server = MCPServer(
        name="reference", instructions="Reference server for the benchmark.", log_level="WARNING"
    )

    @server.tool(name="echo", description="Echo the message back.")
    def echo(message: str) -> Annotated[CallToolResult, EchoOut]:
        """Return the message as text and as structured content."""
        return CallToolResult(
            content=[TextContent(type="text", text=message)],
            structured_content={"echo": message},
        )

    # The demo tenant lists six tools; list as many here, with similar schemas, so that
    # tools/list serialises a comparable amount on both sides. Only `echo` is called.
    @server.tool(name="add", description="Add two integers.")
    def add(a: int, b: int) -> AddOut:
        """Return a + b."""
        return {"sum": a + b}

    @server.tool(name="greet", description="Greet someone by name.")
    def greet(name: str) -> str:
        """Return a greeting."""
        return f"Hello, {name}!"

    @server.tool(name="show_logo", description="Show the demo logo.")
    def show_logo() -> str:
        """Return a placeholder."""
        return "logo"

    @server.tool(name="count_slowly", description="Count to n slowly, reporting progress.")
    def count_slowly(n: int = 3, delay: float = 0.05) -> str:
        """Return a placeholder (never called by the benchmark)."""
        return str(n)

    @server.tool(name="fetch_json", description="POST the arguments to an HTTP endpoint.")
    def fetch_json(payload: dict | None = None) -> str:
        """Return a placeholder (never called by the benchmark)."""
        return "{}"

    # The tenant-scale bench publishes tools named so from this server as an upstream (bench/scale.py).
    for i in range(extra_tools):

        def extra(message: str) -> str:
            """Return the message."""
            return message

        server.add_tool(extra, name=f"tool_{i:05d}", description=f"tool_{i:05d}: Echo the message back.")

    return server.streamable_http_app(
        streamable_http_path="/mcp", json_response=json_response, stateless_http=stateless, host="127.0.0.1"
    )


def main() -> None:
    """Parse flags and run uvicorn in this process with the access log off."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--extra-tools", type=int, default=0, help="also list tool_00000, tool_00001, ...")
    args = parser.parse_args()
    app = build_app(args.json_response, args.port, args.stateless, args.extra_tools)
    # The asyncio loop and the h11 parser, named: uvicorn's "auto" would switch to uvloop/httptools
    # as soon as they are installed (the modern phases install them for ours-on-uvicorn).
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        access_log=False,
        log_level="warning",
        workers=1,
        loop="asyncio",
        http="h11",
    )


if __name__ == "__main__":
    main()
