"""A tenant's own identity provider: the shape of `Tenant.identity` and its checks on save (AMB-203).

`identity` is a JSON object, empty when the tenant takes only our authorization server's tokens.
Otherwise it names the issuer of the access tokens its endpoint accepts and how to check them: JWTs
against `jwks_uri`, or opaque tokens through RFC 7662 introspection at `introspection_url` as
`client_id` (its secret is `Tenant.identity_client_secret`, encrypted, never in this object). The
checks here need no network: the fetches themselves go through the SSRF guard when a token arrives
(mcp_app/oauth/external_tokens.py).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

# Asymmetric only: `none` proves nothing, and an HS* token "signed" with the issuer's public key
# (which anyone can fetch) would verify if the key were used as an HMAC secret.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
SCOPE_CLAIMS = ("scope", "scp")
FIELDS = frozenset(
    {
        "issuer",
        "jwks_uri",
        "introspection_url",
        "client_id",
        "audience",
        "scope_claim",
        "scope_map",
        "algorithms",
        "keep_platform_tokens",
    }
)
URL_FIELDS = ("issuer", "jwks_uri", "introspection_url")
MAX_URL = 2048


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(value: Any) -> str | None:
    """Why `value` is not an https URL we may fetch or name as an issuer (None: it is one).

    http is taken only for a loopback host, and only under DEBUG or MCP_IDENTITY_ALLOW_HTTP_LOOPBACK
    (tests, a local identity provider): a token checked over plain http could be forged in transit.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_URL:
        return "must be an https URL."
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "is not a valid URL."
    if not parts.hostname or parts.username or parts.password or parts.fragment:
        return "must be an https URL with a host, no credentials and no fragment."
    if parts.scheme == "https":
        return None
    local_http = settings.DEBUG or getattr(settings, "MCP_IDENTITY_ALLOW_HTTP_LOOPBACK", False)
    if parts.scheme == "http" and _loopback(parts.hostname) and local_http:
        return None
    return "must use https (http only for a loopback host in development)."


def needs_secret(identity: Any) -> bool:
    """Whether `identity` introspects, so its client needs a secret (`Tenant.identity_client_secret`).

    A missing secret is not a problem of the object: an import reports it as missing, as it does an
    upstream's OAuth client secret, and the admin and the API ask for it.
    """
    return isinstance(identity, dict) and bool(identity.get("introspection_url"))


def problems(identity: Any) -> dict[str, str]:
    """Every problem of an `identity` object, by field ("" names the whole object); {} when fine."""
    if identity in (None, {}):
        return {}
    if not isinstance(identity, dict):
        return {"": "must be an object."}
    found: dict[str, str] = {}
    unknown = sorted(set(identity) - FIELDS)
    if unknown:
        found[""] = f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(FIELDS))}."
    for name in URL_FIELDS:
        if name in identity and identity[name] not in ("", None) or name == "issuer":
            problem = url_problem(identity.get(name))
            if problem:
                found[name] = f"{name} {problem}"
    audience = identity.get("audience")
    if not isinstance(audience, str) or not audience.strip():
        found["audience"] = (
            "audience is required: the value your identity provider puts in the tokens' `aud` claim "
            "for this endpoint (without it, a token issued for any other API would be accepted here)."
        )
    if not identity.get("jwks_uri") and not identity.get("introspection_url"):
        found["jwks_uri"] = "Give jwks_uri (JWT access tokens) or introspection_url (opaque tokens)."
    if identity.get("introspection_url") and (
        not isinstance(identity.get("client_id"), str) or not identity.get("client_id")
    ):
        found["client_id"] = "client_id is required with introspection_url (its client secret too)."
    if (problem := scope_map_problem(identity.get("scope_map", {}))) is not None:
        found["scope_map"] = problem
    claim = identity.get("scope_claim", "scope")
    if claim not in SCOPE_CLAIMS:
        found["scope_claim"] = f"scope_claim must be one of {', '.join(SCOPE_CLAIMS)}."
    algorithms = identity.get("algorithms", ["RS256"])
    if (
        not isinstance(algorithms, list)
        or not algorithms
        or not all(isinstance(a, str) and a in ALGORITHMS for a in algorithms)
    ):
        found["algorithms"] = (
            f"algorithms must be a non-empty list of {', '.join(ALGORITHMS)} (asymmetric only: never none or HS*)."
        )
    if not isinstance(identity.get("keep_platform_tokens", False), bool):
        found["keep_platform_tokens"] = "keep_platform_tokens must be true or false."
    return found


MAX_MAPPED = 100
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")  # RFC 6749 §3.3 scope-token


def scope_map_problem(value: Any) -> str | None:
    """Why a `scope_map` (the provider's scope -> our scopes, space-separated) does not do; None if it does."""
    if not isinstance(value, dict):
        return 'scope_map must be an object: {"their scope": "our scopes, space-separated"}.'
    if len(value) > MAX_MAPPED:
        return f"scope_map maps at most {MAX_MAPPED} scopes."
    for theirs, ours in value.items():
        if not _SCOPE_TOKEN.fullmatch(theirs):
            return f"scope_map: {theirs[:64]!r} is not a scope (no spaces or quotes, at most 200 characters)."
        if not isinstance(ours, str) or not ours.split() or len(ours) > 1000:
            return f'scope_map: {theirs[:64]!r} must map to our scopes, space-separated (e.g. "mcp:tools").'
        if not all(_SCOPE_TOKEN.fullmatch(scope) for scope in ours.split()):
            return f"scope_map: what {theirs[:64]!r} maps to is not a list of scopes."
    return None


def check(identity: Any) -> None:
    """ValidationError on the `identity` field listing every problem."""
    found = problems(identity)
    if found:
        raise ValidationError({"identity": list(found.values())})
