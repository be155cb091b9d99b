"""The admin of tenant definitions, background runs and sessions (Django imports this package)."""

from django.contrib import admin

from mcp_app.admin import (  # noqa: F401 - importing them registers the ModelAdmins
    api_keys,
    api_tokens,
    definitions,
    governance_events,
    guardrails,
    infrastructure,
    policies,
    providers,
    quotas,
    runs,
    service_clients,
    tenant_identity,
    upstreams,
)

# AMB-73: the platform's name, "View site" to the front page (`/`), and no navigation sidebar: the
# home page already lists every model, and the sidebar took a quarter of the width from the lists.
admin.site.site_header = "MCP platform administration"
admin.site.site_title = "MCP platform admin"
admin.site.site_url = "/"
admin.site.enable_nav_sidebar = False

# AMB-271: after every registration above (and those of axes and oauth2_provider, earlier apps).
infrastructure.gate()
