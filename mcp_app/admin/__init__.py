"""The admin of tenant definitions, background runs and sessions (Django imports this package)."""

from mcp_app.admin import definitions, runs  # noqa: F401 - importing them registers the ModelAdmins
