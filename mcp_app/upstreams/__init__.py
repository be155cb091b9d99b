"""Upstream MCP servers in a tenant's catalog: sync, pinned definitions, review (service.py)."""
