"""Routes of the management API, mounted at /api/v1/ by mcpsite/urls.py."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from mcp_app.api import (
    api_keys,
    guardrails,
    history,
    invitations,
    policies,
    portability,
    providers,
    quotas,
    root,
    self_check,
    service_clients,
    tenancy,
    upstreams,
    views,
)
from mcp_app.api.errors import not_found

app_name = "api"

tenant_router = SimpleRouter()
tenant_router.register("tools", views.ToolViewSet, basename="tool")
tenant_router.register("prompts", views.PromptViewSet, basename="prompt")
tenant_router.register("resources", views.ResourceViewSet, basename="resource")
tenant_router.register("resource-templates", views.ResourceTemplateViewSet, basename="resource-template")
tenant_router.register("upstreams", upstreams.UpstreamViewSet, basename="upstream")
tenant_router.register("remote-tools", upstreams.RemoteToolViewSet, basename="remote-tool")
tenant_router.register("runs", views.ToolRunViewSet, basename="run")
tenant_router.register("members", tenancy.MembershipViewSet, basename="member")
tenant_router.register("invitations", invitations.InvitationViewSet, basename="invitation")
tenant_router.register("clients", tenancy.ClientViewSet, basename="client")
tenant_router.register("api-keys", api_keys.ApiKeyViewSet, basename="api-key")
tenant_router.register("service-clients", service_clients.ServiceClientViewSet, basename="service-client")
tenant_router.register("providers", providers.ProviderViewSet, basename="provider")
tenant_router.register("policies", policies.PolicyViewSet, basename="policy")
tenant_router.register("quotas", quotas.QuotaViewSet, basename="quota")
tenant_router.register("guardrails", guardrails.GuardrailViewSet, basename="guardrail")

urlpatterns = [
    # The API root: its resources as links and the docs page (mcp_app/api/root.py).
    path("", root.ApiRoot.as_view(router=tenant_router), name="root"),
    # The OpenAPI 3 schema and its documentation page (Swagger UI from drf_spectacular_sidecar: offline).
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: no inline script for the CSP to allow.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("tenants/", tenancy.TenantListView.as_view(), name="tenants"),
    path("tenants/<str:slug>/", tenancy.TenantSettingsView.as_view(), name="tenant"),
    path("tenants/<str:slug>/", include(tenant_router.urls)),
    # Import/export (mcp_app/api/portability.py) and history/revert (mcp_app/api/history.py) add
    # their own path(...) lines here, above the catch-all.
    path("tenants/<str:slug>/export", portability.ExportView.as_view(), name="tenant-export"),
    path("tenants/<str:slug>/import", portability.ImportView.as_view(), name="tenant-import"),
    path(
        "tenants/<str:slug>/import-openapi",
        portability.ImportOpenApiView.as_view(),
        name="tenant-import-openapi",
    ),
    path("tenants/<str:slug>/check/", self_check.SelfCheckView.as_view(), name="tenant-check"),
    path("tenants/<str:slug>/policy/simulate/", policies.SimulateView.as_view(), name="policy-simulate"),
    path("tenants/<str:slug>/<str:kind>/<int:pk>/history/", history.HistoryView.as_view(), name="history"),
    path(
        "tenants/<str:slug>/<str:kind>/<int:pk>/history/compare/",
        history.CompareView.as_view(),
        name="history-compare",
    ),
    path("tenants/<str:slug>/publish/", views.PublishAllView.as_view(), name="tenant-publish"),
    path(
        "tenants/<str:slug>/<str:kind>/<int:pk>/history/<int:history_id>/revert/",
        history.RevertView.as_view(),
        name="history-revert",
    ),
    #
    # Keep last: any other URL under /api/v1/ is a 404 in the API's JSON error shape.
    re_path(r"^.*$", not_found),
]
