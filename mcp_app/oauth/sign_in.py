"""The platform as an OpenID Connect provider for sign-in clients (AMB-214): identity, no tenant.

Off unless MCP_OIDC_PROVIDER_RSA_KEY (or _KEY_FILE) gives the signing key. Then an application an
administrator registered with the RS256 algorithm is a *sign-in client*: it may ask for `openid`
(with `email`, `profile`) and nothing else, names no MCP server, and gets an id_token signed with that
key (its JWKS at /oauth/.well-known/jwks.json, listed in our discovery documents) saying who the person
is. Every other client still needs one tenant per grant (AMB-24). The id_token carries `email`,
`email_verified` and `groups` (the account's Django groups). An address counts as verified only when
the account accepted an invitation sent to it (the link proved the mailbox, AMB-106); an address an
administrator typed in proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from tenants import wall
from tenants.models import Invitation

OPENID = "openid"
IDENTITY_SCOPES: dict[str, str] = {
    OPENID: "Know who you are on this platform",
    "email": "See your e-mail address",
    "profile": "See your username",
}


def provider_enabled() -> bool:
    return bool(oauth2_settings.OIDC_ENABLED and oauth2_settings.OIDC_RSA_PRIVATE_KEY)


def is_sign_in_client(application: Any) -> bool:
    return (
        provider_enabled()
        and application is not None
        and application.algorithm == get_application_model().RS256_ALGORITHM
    )


def asks_identity(scopes: Iterable[str]) -> bool:
    """Whether a request asks for any identity scope (then it must be an identity request)."""
    return bool(set(scopes) & set(IDENTITY_SCOPES))


def is_identity_request(scopes: Iterable[str], application: Any, resources: list[str]) -> bool:
    """A sign-in client asking for `openid` and other identity scopes only, for no MCP server."""
    wanted = set(scopes)
    return (
        OPENID in wanted
        and wanted <= set(IDENTITY_SCOPES)
        and not resources
        and is_sign_in_client(application)
    )


def email_verified(user: Any) -> bool:
    """True only when the account accepted an invitation sent to its present address (AMB-214)."""
    if not user.email:
        return False
    with wall.bypass("the id_token's email_verified"):
        return Invitation.objects.filter(accepted_by=user, email__iexact=user.email).exists()


def claims(user: Any) -> dict[str, Any]:
    """The id_token's claims beyond `sub` (the scopes they need: validators.McpOAuth2Validator)."""
    return {
        "email": user.email or "",
        "email_verified": email_verified(user),
        "preferred_username": user.get_username(),
        "groups": sorted(user.groups.values_list("name", flat=True)),
    }


def scope_lines(scopes: Iterable[str]) -> list[dict[str, str]]:
    return [{"name": name, "text": IDENTITY_SCOPES[name]} for name in scopes if name in IDENTITY_SCOPES]
