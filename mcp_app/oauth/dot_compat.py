"""Every use of django-oauth-toolkit's (and oauthlib's) private helpers, behind one module.

They are not public API and may change in any release, so pyproject.toml pins the toolkit below its
next minor version, and tests/oauth/test_dot_compat.py checks that each one still exists with the
shape we use. Private *methods* we override in subclasses are listed in OVERRIDDEN for the same test.
"""

from __future__ import annotations

from typing import Any

from oauth2_provider import cimd as _cimd
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.views import dynamic_client_registration as _dcr
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256

# RFC 7591 registration: DOT's view pieces, reused by our RegistrationView.post (it adds rate limits,
# size limits and our redirect policy around them).
application_to_response = _dcr._application_to_response
build_application_kwargs = _dcr._build_application_kwargs
check_permissions = _dcr._check_permissions
error_response = _dcr._error_response
issue_registration_token = _dcr._issue_registration_token
parse_metadata = _dcr._parse_metadata
validation_error_description = _dcr._validation_error_description

# Client ID metadata documents: DOT's URL checks, reused by our fetcher.
validate_client_id_url = _cimd._validate_client_id_url
resolve_and_validate = _cimd._resolve_and_validate

# (class path, method name) of private methods our subclasses override.
OVERRIDDEN = (
    ("oauth2_provider.views.OAuthServerMetadataView", "_get_endpoint_url"),
    ("oauth2_provider.oauth2_validators.OAuth2Validator", "_check_and_set_request_resource"),
    (
        "oauth2_provider.views.dynamic_client_registration.DynamicClientRegistrationManagementView",
        "_authenticate_registration_request",
    ),
)


def add_iss_to_redirect(uri: str, issuer: str) -> str:
    """The redirect URI with RFC 9207 `iss` added (DOT adds it to successful redirects only)."""
    return _add_iss_to_redirect(uri, issuer)


def allow_only_s256(auth_grant: Any) -> None:
    """Make oauthlib's code grant accept PKCE S256 only: "plain" is refused, and so is a challenge
    without a method (RFC 7636 reads that as plain). oauthlib has no public setting for it."""
    auth_grant._code_challenge_methods = {"S256": code_challenge_method_s256}
