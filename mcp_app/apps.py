from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Inside ready(), not at the top: these modules use models, which cannot be imported while
        # Django is still populating the app registry (Django's documented place for receivers).
        # audit_trail: clients, consent and secrets in the audit trail; definitions: edits announce
        # list_changed; the vault stores rows, a layer above the handlers that need its tokens, so it
        # is handed to them here (connected accounts, AMB-215).
        from mcp_app.connected_accounts import vault  # noqa: PLC0415
        from mcp_app.handlers import accounts  # noqa: PLC0415
        from mcp_app.oauth import signals as oauth_signals  # noqa: F401, PLC0415 - token caches follow revocations
        from mcp_app.signals import audit_trail, definitions  # noqa: F401, PLC0415

        accounts.install(vault.access_token)
