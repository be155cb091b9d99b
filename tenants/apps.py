from django.apps import AppConfig

from tenants import wall


class TenantsConfig(AppConfig):
    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        wall.install()  # PostgreSQL sessions' tenant settings follow the running code's scope (AMB-96)
