"""Token caches follow the database: a changed token, API key, membership or user evicts what it allowed.

Imported by McpAppConfig.ready (receivers connect at import, once the app registry is ready).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from oauth2_provider.models import get_access_token_model

from mcp_app.oauth import tokens
from tenants.models import ApiKey, Membership

for _name, _signal in (("save", post_save), ("delete", post_delete)):
    _signal.connect(
        tokens.on_token_changed, sender=get_access_token_model(), dispatch_uid=f"mcp-token-{_name}"
    )
    _signal.connect(tokens.on_token_changed, sender=ApiKey, dispatch_uid=f"mcp-api-key-{_name}")
    _signal.connect(tokens.on_user_changed, sender=Membership, dispatch_uid=f"mcp-member-{_name}")
    _signal.connect(tokens.on_user_changed, sender=get_user_model(), dispatch_uid=f"mcp-user-{_name}")
