"""Routes of the management API, mounted at /api/v1/ by mcpsite/urls.py."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

app_name = "api"

urlpatterns = [
    # The OpenAPI 3 schema and its documentation page (Swagger UI from drf_spectacular_sidecar: offline).
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    # Import/export (mcp_app/api/portability.py) and history/revert (mcp_app/api/history.py) add
    # their own path(...) lines below.
]
