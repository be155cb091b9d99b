"""Client registration policy: redirect URI rules, display metadata, and RFC 7591 registration limits.

django-oauth-toolkit's registration view does the RFC 7591 work (parsing, grant types, secrets, the
registration access token); this module adds what an open registration endpoint on the internet needs
on top (AMB-26, AMB-28): stricter redirect URIs, a body size cap, a per-address rate limit, and the
client's display metadata (logo, home page) for the consent page.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from oauth2_provider.models import get_application_model
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from lib import nesting
from mcp_app.oauth import dot_compat, events, ratelimit

# http is allowed only to these hosts (RFC 8252 §7.3; `localhost` too, AMB-28), on any port.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
# Schemes that can never be an app's redirect: script, inline data, local files, browser internals.
REFUSED_SCHEMES = frozenset(
    {
        "javascript",
        "data",
        "file",
        "vbscript",
        "about",
        "blob",
        "filesystem",
        "view-source",
        "ws",
        "wss",
        "ftp",
    }
)
PRIVATE_USE_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,63}$")
MAX_REDIRECT_URIS = 10
MAX_URI_LENGTH = 2000
MAX_NAME_LENGTH = 200
GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
# OpenID Connect Registration §2 application types (MCP clients send one since 2026-07-28); omitted or null = "web".
APPLICATION_TYPES = frozenset({"web", "native"})
DEFAULT_APPLICATION_TYPE = "web"
DISPLAY_FIELDS = ("logo_uri", "client_uri", "policy_uri", "tos_uri")
DISPLAY_CACHE_PREFIX = "mcp:oauth:client-display:"


@dataclass(frozen=True)
class Refusal:
    """An RFC 7591 §3.2.2 error: `invalid_redirect_uri` or `invalid_client_metadata`."""

    error: str
    description: str

    def response(self) -> HttpResponse:
        return dot_compat.error_response(self.error, self.description)


def redirect_uri_problem(uri: Any) -> str | None:
    """Say why a redirect URI cannot be registered, or None when it can (AU-32, AMB-28)."""
    if not isinstance(uri, str) or not uri:
        return "each redirect URI must be a non-empty string"
    if len(uri) > MAX_URI_LENGTH:
        return f"redirect URIs are limited to {MAX_URI_LENGTH} characters"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        return "a redirect URI must not contain spaces or control characters"
    if "#" in uri:
        return "a redirect URI must not contain a fragment (RFC 6749 §3.1.2)"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - an out-of-range port raises ValueError
    except ValueError:
        return f"{uri!r} is not a valid URI"
    scheme = parts.scheme
    if not scheme:
        return f"{uri!r} is not an absolute URI"
    if scheme != scheme.lower():
        return "the scheme of a redirect URI must be lower-case"
    if scheme in REFUSED_SCHEMES:
        return f"the {scheme}: scheme is not allowed for redirect URIs"
    if "@" in parts.netloc:
        return "a redirect URI must not contain user credentials"
    if scheme == "https":
        if not parts.hostname:
            return "an https redirect URI needs a host"
        return None
    if scheme == "http":
        if parts.hostname not in LOOPBACK_HOSTS:
            return "http redirect URIs are allowed only on loopback (127.0.0.1, [::1], localhost); use https"
        return None
    if not PRIVATE_USE_SCHEME.match(scheme):
        return f"the scheme {scheme!r} is not a valid private-use URI scheme"
    return None


def allowed_redirect_schemes(application: Any) -> list[str]:
    """http, https and the private-use schemes this client registered (RFC 8252 §7.1)."""
    schemes = {"http", "https"}
    for uri in application.redirect_uris.split():
        scheme = urlsplit(uri).scheme
        if scheme and redirect_uri_problem(uri) is None:
            schemes.add(scheme)
    return sorted(schemes)


def _display_url_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_URI_LENGTH:
        return f"{name} must be a URL of at most {MAX_URI_LENGTH} characters"
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or "@" in parts.netloc:
        return f"{name} must be an http(s) URL"
    return None


def metadata_problem(data: dict[str, Any]) -> Refusal | None:
    """Check registration metadata against our policy, before django-oauth-toolkit builds the client."""
    uris = data.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        return Refusal("invalid_redirect_uri", "redirect_uris must be a non-empty array")
    if len(uris) > MAX_REDIRECT_URIS:
        return Refusal("invalid_redirect_uri", f"at most {MAX_REDIRECT_URIS} redirect URIs may be registered")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return Refusal("invalid_redirect_uri", problem)
    grant_types = data.get("grant_types", ["authorization_code"])
    if not _string_list(grant_types) or not set(grant_types) <= GRANT_TYPES or not grant_types:
        return Refusal(
            "invalid_client_metadata", "grant_types may only be authorization_code and refresh_token"
        )
    response_types = data.get("response_types", ["code"])
    if not _string_list(response_types) or set(response_types) - {"code"}:
        return Refusal("invalid_client_metadata", 'response_types may only be ["code"]')
    application_type = data.get("application_type")
    if application_type is not None and not _is_application_type(application_type):
        return Refusal(
            "invalid_client_metadata",
            f'application_type {_shown(application_type)} is not supported: use "native" for desktop, '
            'mobile, command-line and localhost apps, or "web" for browser apps served from a remote host',
        )
    name = data.get("client_name", "")
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH:
        return Refusal(
            "invalid_client_metadata", f"client_name must be a string of at most {MAX_NAME_LENGTH} characters"
        )
    for field in DISPLAY_FIELDS:
        if field in data:
            problem = _display_url_problem(field, data[field])
            if problem:
                return Refusal("invalid_client_metadata", problem)
    if "scope" in data and not isinstance(data["scope"], str):
        return Refusal("invalid_client_metadata", "scope must be a string")
    return None


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_application_type(value: Any) -> bool:
    # Type check first: a list or object sent by the client is unhashable in a set lookup.
    return isinstance(value, str) and value in APPLICATION_TYPES


def _shown(value: Any) -> str:
    """A client-sent value, short enough to quote in an error description."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def application_type_of(data: dict[str, Any]) -> str:
    """The client's application type: as registered, or OIDC's default "web" when omitted."""
    value = data.get("application_type")
    return DEFAULT_APPLICATION_TYPE if value is None else value


def _display_key(client_id: str) -> str:
    return DISPLAY_CACHE_PREFIX + hashlib.sha256(client_id.encode()).hexdigest()


def remember_display_metadata(client_id: str, metadata: dict[str, Any], timeout: int | None) -> None:
    """Keep the client's https logo and links for the consent page (None: no expiry)."""
    display = {}
    for field in DISPLAY_FIELDS:
        value = metadata.get(field)
        if (
            isinstance(value, str)
            and _display_url_problem(field, value) is None
            and value.startswith("https://")
        ):
            display[field] = value
    if _is_application_type(metadata.get("application_type")):
        display["application_type"] = metadata["application_type"]
    cache.set(_display_key(client_id), display, timeout)


def display_metadata(client_id: str) -> dict[str, str]:
    """The logo/links a client declared, or {} when unknown (the consent page then shows less)."""
    return cache.get(_display_key(client_id)) or {}


def _parse_metadata(body: bytes) -> dict[str, Any] | HttpResponse:
    """DOT's parse, behind the one nesting limit (AMB-115): its json.loads recursed into a 500.
    The metadata, or the error response that refuses it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return dot_compat.error_response("invalid_client_metadata", "Request body must be UTF-8 JSON")
    if nesting.json_depth_exceeds(text, nesting.limit()):
        return dot_compat.error_response(
            "invalid_client_metadata", f"Request body is nested deeper than {nesting.limit()} levels"
        )
    data, error = dot_compat.parse_metadata(text)
    return error if error is not None else data


def _too_large() -> HttpResponse:
    limit = settings.MCP_OAUTH_MAX_REGISTRATION_BYTES
    return dot_compat.error_response(
        "invalid_client_metadata", f"Registration metadata is limited to {limit} bytes.", 413
    )


def _oversized(request: HttpRequest) -> bool:
    limit = settings.MCP_OAUTH_MAX_REGISTRATION_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    return declared > limit or len(request.body) > limit


class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 open registration (AU-25): DOT's view with our redirect policy and limits."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = self._register(request, *args, **kwargs)
        events.count("registration", "created" if response.status_code == 201 else "refused")
        return response

    def _register(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = ratelimit.retry_after(
            "register", ratelimit.client_address(request), settings.MCP_OAUTH_REGISTRATIONS_PER_MINUTE
        )
        if wait:
            return ratelimit.too_many("registrations", wait)
        if _oversized(request):
            return _too_large()
        if not dot_compat.check_permissions(request):
            return dot_compat.error_response(
                "access_denied", "Authentication required to register a client", status=401
            )
        data = _parse_metadata(request.body)
        if isinstance(data, HttpResponse):
            return data
        refusal = metadata_problem(data)
        if refusal:
            return refusal.response()
        app_kwargs, error = dot_compat.build_application_kwargs(data)
        if error:
            return error
        application_model = get_application_model()
        application = application_model(
            user=None, registration_source=application_model.RegistrationSource.DCR, **app_kwargs
        )
        raw_secret = application.client_secret if application.client_type == "confidential" else None
        try:
            # Field checks only: DOT's model clean() would refuse private-use redirect schemes,
            # which metadata_problem() has already vetted more strictly than it would.
            application.clean_fields()
        except ValidationError as exc:
            return dot_compat.error_response(
                "invalid_client_metadata", dot_compat.validation_error_description(exc)
            )
        with transaction.atomic():
            application.save()
            registration_token = dot_compat.issue_registration_token(application, None)
        application_type = application_type_of(data)
        remember_display_metadata(application.client_id, {**data, "application_type": application_type}, None)
        body = dot_compat.application_to_response(application, registration_token, request)
        body["client_id_issued_at"] = int(timezone.now().timestamp())
        if raw_secret:
            body["client_secret"] = raw_secret
            body["client_secret_expires_at"] = 0  # RFC 7591 §3.2.1: 0 = never expires
            if data.get("token_endpoint_auth_method") == "client_secret_post":
                body["token_endpoint_auth_method"] = "client_secret_post"
        for field in DISPLAY_FIELDS:
            if field in data:
                body[field] = data[field]
        body["application_type"] = application_type
        return JsonResponse(body, status=201)


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592 read/update/delete with the registration access token; updates obey our policy.

    Reads and updates also return the stored application_type (DOT's response has no such field).
    """

    def get(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        return _with_application_type(super().get(request, client_id, *args, **kwargs), client_id)

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            return auth
        if _oversized(request):
            return _too_large()
        data = _parse_metadata(request.body)
        if isinstance(data, HttpResponse):
            return data
        refusal = metadata_problem(data)
        if refusal:
            return refusal.response()
        response = super().put(request, client_id, *args, **kwargs)
        if response.status_code == 200:
            remember_display_metadata(
                client_id, {**data, "application_type": application_type_of(data)}, None
            )
        return _with_application_type(response, client_id)


def _with_application_type(response: HttpResponse, client_id: str) -> HttpResponse:
    """Add the stored application_type to a successful RFC 7592 response (left out when unknown)."""
    stored = display_metadata(client_id).get("application_type")
    if response.status_code != 200 or not stored:
        return response
    body = json.loads(response.content)
    body["application_type"] = stored
    response.content = json.dumps(body)
    return response
