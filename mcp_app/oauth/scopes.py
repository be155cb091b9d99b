"""Scopes the platform issues and what each one admits."""

from __future__ import annotations

from mcp_app.core.scopes import PROMPTS, RESOURCES, TOOLS

# Advertised in both metadata documents; a per-tool required scope (Tool.required_scope) comes on top.
BASE_SCOPES: dict[str, str] = {
    TOOLS: "List and call this server's tools",
    PROMPTS: "List and use this server's prompts",
    RESOURCES: "List, read and subscribe to this server's resources",
}

# The management API's scope (mcp_app/api/). Deliberately not a base scope (AMB-51): base scopes are
# the default grant and the 401 challenge of every MCP endpoint, and a token is bound to one audience
# anyway: a `manage` token's audience is the API (<MCP_PUBLIC_URL>/api/v1), which no MCP endpoint accepts.
MANAGE = "manage"
MANAGE_DESCRIPTION = "Manage your tenants' definitions, members and settings through the REST API"
