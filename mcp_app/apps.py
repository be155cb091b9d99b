from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401  - connects definition-change notifications
        from .oauth import resource_server

        resource_server.install()  # bearer tokens on oauth tenants' MCP endpoints
