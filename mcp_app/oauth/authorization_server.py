"""The authorization server's endpoints: django-oauth-toolkit's views, bound to tenants.

DOT does the OAuth work (code grant, PKCE, token issue and rotation, revocation, introspection,
registration, client ID metadata documents, RFC 8707 resources, RFC 9207 `iss`). What is ours:
the issuer and endpoint URLs taken from MCP_PUBLIC_URL (AMB-25), S256-only PKCE, the consent page
(tenant choice for clients that send no `resource`, membership check, never silent approval), `iss`
on error redirects too, and introspection limited to the client's own tokens.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from django import forms
from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.http import OAuth2ResponseRedirect
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.views import AuthorizationView, IntrospectTokenView, OAuthServerMetadataView, TokenView
from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase
from oauthlib.openid import Server as OpenIDServer

from mcp_app.models import Tool
from mcp_app.oauth import (
    consent,
    dot_compat,
    events,
    ratelimit,
    registration,
    resources,
    scopes,
    sign_in,
    tokens,
    validators,
)
from tenants.models import Tenant


def _harden(server: Server | OpenIDServer, request_validator: Any) -> None:
    code_grants = [server.auth_grant]
    if isinstance(server, OpenIDServer):
        # The OpenID Connect code grant runs a code grant of its own underneath (oauthlib's proxy_target).
        code_grants.append(server.openid_connect_auth.proxy_target)
    for grant in code_grants:
        dot_compat.allow_only_s256(grant)
        _custom_validators(grant).pre_auth.append(request_validator.validate_authorization_extras)
    _custom_validators(server.credentials_grant).post_token.append(request_validator.validate_service_client)


def _custom_validators(grant: GrantTypeBase) -> Any:
    """The grant's hooks (oauthlib's GrantTypeBase sets them in __init__; its stubs do not declare them)."""
    return vars(grant)["custom_validators"]


class McpOAuthServer(Server):
    """oauthlib's server with PKCE S256 only and our pre-authorization checks (AU-31)."""

    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        _harden(self, request_validator)


class McpOpenIDServer(OpenIDServer):
    """The same, able to answer `openid` requests with an id_token: the provider is on (AMB-214)."""

    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        _harden(self, request_validator)


class ServerMetadataView(OAuthServerMetadataView):
    """RFC 8414 metadata, also served as OpenID discovery; issuer and URLs from MCP_PUBLIC_URL (AU-20)."""

    def _get_endpoint_url(self, request: HttpRequest, view_name: str, required: bool = False) -> str | None:
        url = super()._get_endpoint_url(request, view_name, required)
        if url is None:
            return None
        return resources.issuer() + urlsplit(url).path

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["issuer"] = resources.issuer()
        data["scopes_supported"] = list(scopes.BASE_SCOPES)
        data["authorization_response_iss_parameter_supported"] = True
        data["code_challenge_methods_supported"] = ["S256"]
        if sign_in.provider_enabled():
            # OpenID Connect discovery for sign-in clients (AMB-214): their scopes and the signing key.
            data["scopes_supported"] += list(sign_in.IDENTITY_SCOPES)
            data["id_token_signing_alg_values_supported"] = ["RS256"]
            data["subject_types_supported"] = ["public"]
            data["claims_supported"] = ["sub", "email", "email_verified", "preferred_username", "groups"]
        out = JsonResponse(data)
        out["Access-Control-Allow-Origin"] = "*"
        out["Cache-Control"] = "public, max-age=300"
        return out


class ConsentForm(AllowForm):
    """DOT's hidden-field form plus the tenant picked by the user when the client named none."""

    tenant = forms.CharField(required=False, max_length=63)


def _scope_lines(scope_names: list[str], tenant: Tenant | None) -> list[dict[str, str]]:
    """Each requested scope in plain words for the consent page."""
    lines = []
    for name in scope_names:
        if name in scopes.BASE_SCOPES:
            text = scopes.BASE_SCOPES[name]
        elif name == validators.OFFLINE_ACCESS:
            text = "Stay connected: renew its access without asking you again"
        else:
            tools = (
                list(
                    Tool.objects.needing_scopes(tenant)
                    .filter(required_scope=name)
                    .values_list("name", flat=True)
                )
                if tenant
                else []
            )
            text = (
                "Call the tool" + ("s " if len(tools) > 1 else " ") + ", ".join(tools)
                if tools
                else "An extra permission some tools require"
            )
        lines.append({"name": name, "text": text})
    return lines


def client_context(application: Any, redirect_uri: str | None) -> dict[str, Any]:
    """What the login and consent pages say about a client: name, logo, home page, where it returns."""
    display = registration.display_metadata(application.client_id)
    source = application.registration_source
    if source == application.RegistrationSource.CIMD:
        origin = f"metadata document at {urlsplit(application.client_id).hostname}"
    elif source == application.RegistrationSource.DCR:
        origin = "registered itself (dynamic client registration)"
    else:
        origin = "registered by an administrator"
    return {
        "client_name": application.name or urlsplit(application.client_id).hostname or "An application",
        "client_logo": display.get("logo_uri", ""),
        "client_uri": display.get("client_uri", ""),
        "client_origin": origin,
        "client_id": application.client_id,
        "redirect_target": _redirect_label(redirect_uri or ""),
    }


def _redirect_label(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}: (an app on your device)" if parts.scheme else ""


class AuthorizeView(AuthorizationView):
    """The authorization endpoint and consent page: a member approves one tenant, every time."""

    template_name = "oauth/consent.html"
    form_class = ConsentForm
    login_url = reverse_lazy("oauth-login")

    def handle_no_permission(self) -> HttpResponse:
        if self.request.method == "POST":
            # Allow or Deny pressed after the sign-in ended (expired, or signed out in another tab). The form
            # posts to the authorization URL itself, so after signing in again the person is back at this
            # same request, validated afresh by the GET; the login page says why it is asked again.
            response = super().handle_no_permission()
            response["Location"] += "&session=ended"
            return response
        # Check the request before asking anyone to log in: a forged one never reaches the login page.
        try:
            self.validate_authorization_request(self.request)
        except OAuthToolkitError as error:
            return self.error_response(error, application=None)
        return super().handle_no_permission()

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        if application is None:
            client_id = self.request.POST.get("client_id") or self.request.GET.get("client_id")
            application = get_application_model().objects.filter(client_id=client_id).first()
        schemes = registration.allowed_redirect_schemes(application) if application else ["http", "https"]
        # RFC 9207: every authorization response carries iss, errors included (DOT adds it on success only).
        return OAuth2ResponseRedirect(
            dot_compat.add_iss_to_redirect(redirect_to, resources.issuer()), schemes
        )

    def _error_redirect(self, credentials: dict[str, Any], error: str, application: Any) -> HttpResponse:
        params = {"error": error}
        if credentials.get("state"):
            params["state"] = credentials["state"]
        uri = credentials["redirect_uri"]
        return self.redirect(uri + ("&" if "?" in uri else "?") + urlencode(params), application)

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            scope_names, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as error:
            return self.error_response(error, application=None)
        application = get_application_model().objects.get(client_id=credentials["client_id"])
        if "none" in request.GET.get("prompt", "").split():
            # Consent is asked every time, so it can never be given without a page (OIDC Core §3.1.2.6).
            return self._error_redirect(credentials, "consent_required", application)
        values = request.GET.getlist("resource")
        tenant = validators.oauth_tenant_for_resource(values[0]) if values else None
        self.oauth2_data = {
            "scopes": scope_names,
            "client_id": credentials["client_id"],
            "redirect_uri": credentials["redirect_uri"],
            "response_type": credentials["response_type"],
            "state": credentials["state"],
            "code_challenge": credentials.get("code_challenge"),
            "code_challenge_method": credentials.get("code_challenge_method"),
            "resource": resources.canonical_uri(tenant.slug) if tenant else None,
        }
        form = self.get_form(self.get_form_class())
        context = {
            "form": form,
            **client_context(application, credentials["redirect_uri"]),
            "tenant": tenant,
            "tenant_url": resources.canonical_uri(tenant.slug) if tenant else "",
            "scope_lines": _scope_lines(scope_names, tenant),
        }
        if tenant is not None:
            # A step-up: mark what this client has not been granted for this server before (AMB-235).
            granted = consent.granted_scopes(request.user, application, resources.canonical_uri(tenant.slug))
            context["step_up"] = any(line["new"] for line in consent.mark_new(context["scope_lines"], granted))
        if sign_in.is_identity_request(scope_names, application, values):
            context["scope_lines"] = sign_in.scope_lines(scope_names)
            context["sign_in_only"] = True
            return render(request, self.template_name, context)
        if tenant is not None:
            if not validators.is_member(request.user, tenant):
                return render(request, "oauth/not_member.html", context, status=403)
        else:
            wanted = set(scope_names)
            choices = [
                t
                for t in validators.member_oauth_tenants(request.user)
                if wanted <= validators.grantable_scopes(t)
            ]
            if not choices:
                return render(request, "oauth/not_member.html", context, status=403)
            context["choices"] = [(t, resources.canonical_uri(t.slug)) for t in choices]
        return render(request, self.template_name, context)

    def form_valid(self, form: ConsentForm) -> HttpResponse:
        data = form.cleaned_data
        application = get_application_model().objects.filter(client_id=data["client_id"]).first()
        if application is None:
            return self._page_error("The application is unknown.")
        given = (data.get("resource") or "").split()
        if sign_in.is_identity_request((data.get("scope") or "").split(), application, given):
            data["resource"] = ""
            return super().form_valid(form)
        if len(given) > 1:
            return self._page_error("Ask for one MCP server per authorization.")
        tenant = (
            validators.oauth_tenant_for_resource(given[0])
            if given
            else validators.oauth_tenant_by_slug(data.get("tenant"))
        )
        if data.get("allow"):
            if tenant is None:
                return self._page_error("Choose the MCP server to connect.")
            if not validators.is_member(self.request.user, tenant):
                context = {
                    **client_context(application, data.get("redirect_uri")),
                    "tenant": tenant,
                    "form": form,
                }
                return render(self.request, "oauth/not_member.html", context, status=403)
        data["resource"] = resources.canonical_uri(tenant.slug) if tenant else ""
        return super().form_valid(form)

    def _page_error(self, description: str) -> HttpResponse:
        return render(
            self.request,
            self.template_name,
            {"error": {"error": "invalid_request", "description": description}},
            status=400,
        )


class McpTokenView(TokenView):
    """DOT's token endpoint; errors raised while saving a token (e.g. invalid_target) get JSON headers too."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = ratelimit.retry_after(
            "token", ratelimit.client_address(request), settings.MCP_OAUTH_TOKEN_REQUESTS_PER_MINUTE
        )
        if wait:
            events.count("token", "throttled")
            return ratelimit.too_many("token requests", wait)
        response = super().post(request, *args, **kwargs)
        events.count("token", "issued" if response.status_code == 200 else "refused")
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith(
            "application/json"
        ):
            response["Content-Type"] = "application/json"
        response["Cache-Control"] = "no-store"
        return response


class McpLoginView(LoginView):
    """Sign-in page of the authorization flow, naming the client that asked."""

    template_name = "oauth/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["session_ended"] = self.request.GET.get("session") == "ended"
        query = urlsplit(self.get_redirect_url() or "")
        if query.path == reverse("oauth2_provider:authorize"):
            params = dict(parse_qsl(query.query))
            application = (
                get_application_model().objects.filter(client_id=params.get("client_id", "")).first()
            )
            if application is not None:
                context.update(client_context(application, params.get("redirect_uri")))
        return context


def _client_id_of(request: HttpRequest) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
        return unquote(decoded.partition(":")[0])
    return request.POST.get("client_id")


class IntrospectView(IntrospectTokenView):
    """RFC 7662 for confidential clients, about their own tokens only; POST only (no tokens in URLs)."""

    http_method_names = ["post", "options"]

    # Overriding dispatch drops the csrf_exempt DOT puts on its own: without this, every
    # non-browser POST (any real client) got Django's CSRF 403 page.
    @method_decorator(csrf_exempt)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if (request.method or "").lower() not in self.http_method_names:
            return self.http_method_not_allowed(request, *args, **kwargs)
        if request.method == "POST" and not self.authenticate_client(request):
            response = JsonResponse({"error": "invalid_client"}, status=401)
            response["WWW-Authenticate"] = 'Basic realm="introspection"'
            return response
        return super().dispatch(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        token_value = request.POST.get("token")
        if token_value:
            checksum = tokens.checksum(token_value)
            owner = (
                get_access_token_model()
                .objects.filter(token_checksum=checksum)
                .values_list("application__client_id", flat=True)
                .first()
            )
            if owner != _client_id_of(request):
                return JsonResponse({"active": False})
        return self.get_token_response(token_value)
