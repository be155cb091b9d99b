"""The OAuth scopes of the MCP method families: named once, for the method table (protocol.dispatch)
that says which one each method needs and for the authorization server (oauth.scopes) that issues them."""

from __future__ import annotations

TOOLS = "mcp:tools"
PROMPTS = "mcp:prompts"
RESOURCES = "mcp:resources"
