from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from oauth2_provider.views import JwksInfoView

from lib.ace_worker import json_worker
from mcp_app.admin import portability as portability_admin
from mcp_app.admin import self_check as self_check_admin
from mcp_app.api.token_page import api_tokens
from mcp_app.connect import wayfinding
from mcp_app.connect.page import connect_page
from mcp_app.connected_accounts import pages as connection_pages
from mcp_app.demo import ask_views as demo_ask_views
from mcp_app.demo import views as demo_views
from mcp_app.handlers.form_page import form_page
from mcp_app.oauth.authorization_server import (
    AuthorizeView,
    IntrospectView,
    McpLoginView,
    McpTokenView,
    ServerMetadataView,
)
from mcp_app.oauth.metadata import TenantResourceMetadataView
from mcp_app.oauth.registration import RegistrationManagementView, RegistrationView
from mcp_app.oauth.revocation import McpRevokeTokenView
from mcp_app.operations.metrics import metrics
from mcp_app.operations.probes import ReadinessView, live
from mcp_app.registry import serving as registry
from mcp_app.usage import views as usage_views
from mcpsite import sso
from mcpsite.views import front
from tenants.invitation_page import invitation_page

# The authorization server's endpoints, named as django-oauth-toolkit expects (its metadata view
# reverses these names in the oauth2_provider namespace).
oauth_urlpatterns = [
    path("authorize", AuthorizeView.as_view(), name="authorize"),
    path("token", McpTokenView.as_view(), name="token"),
    path("revoke", McpRevokeTokenView.as_view(), name="revoke-token"),
    path("introspect", IntrospectView.as_view(), name="introspect"),
    path("register", RegistrationView.as_view(), name="dcr-register"),
    path("register/<str:client_id>", RegistrationManagementView.as_view(), name="dcr-register-management"),
    # The id_token signing key of the OpenID Connect provider (AMB-214); a 404 while it is off.
    path(".well-known/jwks.json", JwksInfoView.as_view(), name="jwks-info"),
]

urlpatterns = [
    # The platform's front page: sign in, your tenants and their pages, the admin for staff (AMB-72).
    path("", front, name="front"),
    # The admin JSON editor's syntax worker, from our origin: the CSP allows it (lib/ace_worker.py).
    path("json-editor/json-worker.js", json_worker, name="json-editor-worker"),
    # Browsers ask for /favicon.ico whatever the page says: the site's icon (every page links it too).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
    # A tenant's Export, Import and OpenAPI import pages, beside its admin page (mcp_app/admin/portability.py).
    path("admin/tenants/tenant/<int:tenant_id>/", include((portability_admin.urls(), "admin-portability"))),
    # Its "Check this tenant" page (mcp_app/admin/self_check.py).
    path("admin/tenants/tenant/<int:tenant_id>/", include((self_check_admin.urls(), "admin-self-check"))),
    path("admin/", admin.site.urls),
    # The REST management API (mcp_app/api/): definitions, runs, clients, members, settings; OpenAPI.
    path("api/v1/", include("mcp_app.api.urls")),
    # A person's own `manage` tokens for the API: made (shown once) and revoked here.
    path("api-tokens", api_tokens, name="api-tokens"),
    # RFC 9728 metadata of each tenant's MCP endpoint (resource server side).
    path(
        ".well-known/oauth-protected-resource/t/<slug:slug>/mcp",
        TenantResourceMetadataView.as_view(),
        name="mcp-protected-resource-metadata",
    ),
    # One authorization server for every tenant, at the origin (AMB-25): RFC 8414 and OpenID discovery.
    path(
        ".well-known/oauth-authorization-server", ServerMetadataView.as_view(), name="oauth-server-metadata"
    ),
    re_path(
        r"^\.well-known/openid-configuration/?$", ServerMetadataView.as_view(), name="openid-configuration"
    ),
    path("oauth/", include((oauth_urlpatterns, "oauth2_provider"))),
    path("oauth/login", McpLoginView.as_view(), name="oauth-login"),
    path("oauth/logout", LogoutView.as_view(), name="oauth-logout"),
    # Single sign-on (mcpsite/sso.py, AMB-212): to the provider and back; 404 unless it is configured.
    path("sso/start", sso.SsoStart.as_view(), name="sso-start"),
    path("sso/callback", sso.SsoCallback.as_view(), name="sso-callback"),
    # An invitation's link: accept it signed in or with a new account (tenants/invitation_page.py, AMB-106).
    path("invitations/<str:token>", invitation_page, name="invitation"),
    # A tenant's URLs a person gets slightly wrong (mcp_app/connect/wayfinding.py, AMB-230, AMB-231): a
    # slug with capitals goes to the lower-case path; /t/<slug> alone goes to the connect page.
    re_path(wayfinding.WRONG_CASE, wayfinding.wrong_case, name="tenant-wrong-case"),
    re_path(r"^t/(?P<slug>[a-z0-9-]+)/?$", wayfinding.tenant_home, name="tenant-home"),
    # The MCP Registry's v0.1 read endpoints over the listed tenants, and each one's server.json
    # (mcp_app/registry/serving.py, AMB-372). A server name holds one slash, URL-encoded or not.
    path("v0.1/servers", registry.servers, name="registry-servers"),
    re_path(r"^v0\.1/servers/(?P<name>[^/]+/[^/]+)/versions$", registry.versions, name="registry-versions"),
    re_path(
        r"^v0\.1/servers/(?P<name>[^/]+/[^/]+)/versions/(?P<version>[^/]+)$",
        registry.version,
        name="registry-version",
    ),
    # Any other URL under /v0.1/ (a name without its slash...): the registry's 404, not a page.
    re_path(r"^v0\.1/", registry.not_found),
    path("t/<slug:slug>/server.json", registry.tenant_server_json, name="tenant-server-json"),
    # Usage dashboards (mcp_app/usage/): a tenant's, for its members; every tenant's, for superusers.
    path("t/<slug:slug>/dashboard", usage_views.dashboard, name="tenant-dashboard"),
    path("usage/", usage_views.overview, name="usage-overview"),
    # A tenant's connect page: its MCP URL, client configurations, what it serves (AMB-63, AMB-64).
    path("t/<slug:slug>/connect", connect_page, name="tenant-connect"),
    # A sensitive form's page (URL-mode elicitation): the person answers here, never in the client.
    path("t/<slug:slug>/form/<str:token>", form_page, name="form-page"),
    # Connected accounts (mcp_app/connected_accounts/): a tool's start link, the provider's callback, done; the
    # person's own list with Disconnect.
    path("t/<slug:slug>/connections/<str:provider_name>/start", connection_pages.start, name="connection-start"),
    path(
        "t/<slug:slug>/connections/<str:provider_name>/callback",
        connection_pages.callback,
        name="connection-callback",
    ),
    path("t/<slug:slug>/connections/<str:provider_name>/done", connection_pages.done, name="connection-done"),
    path("connections/", connection_pages.mine, name="my-connections"),
    path("connections/<int:connection_id>/disconnect", connection_pages.disconnect, name="connection-disconnect"),
    # Probes for load balancers and orchestrators (docs/operations.md).
    path("health/live", live, name="health-live"),
    path("health/ready", ReadinessView.as_view(), name="health-ready"),
    # Prometheus metrics of this process (protected: MCP_METRICS_TOKEN or MCP_METRICS_ALLOW).
    path("metrics", metrics, name="metrics"),
    # What the demo's fetch_json and stream_count tools post to (mcp_app/demo/tenants/demo.yaml).
    path("demo/echo", demo_views.echo, name="demo-echo"),
    path("demo/stream", demo_views.stream, name="demo-stream"),
    # What ask_everything, greet_in_a_task and fail_on_purpose stream from (AMB-284..286).
    path("demo/ask-together", demo_ask_views.ask_together, name="demo-ask-together"),
    path("demo/ask-then-task", demo_ask_views.ask_then_task, name="demo-ask-then-task"),
    path("demo/fail", demo_ask_views.fail, name="demo-fail"),
    path("demo/reply/<str:token>", demo_ask_views.reply, name="demo-reply"),
]
