from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Inside ready(): the receivers use models, which cannot be imported while the registry loads.
        from audit import receivers  # noqa: F401, PLC0415 - sign-ins, memberships, tenant settings
