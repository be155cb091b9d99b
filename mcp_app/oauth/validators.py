"""django-oauth-toolkit's OAuth2Validator bound to tenants: audiences, grantable scopes, membership.

Every grant and token names exactly one tenant endpoint (its canonical URI, RFC 8707), only a member
of that tenant can approve a grant, and the scopes a client may ask for are the base scopes plus the
required scopes of that tenant's tools.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.core.cache import cache
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749 import errors

from mcp_app.models import Tool
from mcp_app.oauth import resources, scopes, service_clients, sign_in, tokens
from tenants import access, wall
from tenants.models import AuthMode, Tenant

# Accepted when asked for but not advertised: refresh tokens are issued to every code-flow client anyway.
OFFLINE_ACCESS = "offline_access"
SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5B\x5D-\x7E]{1,100}$")
MAX_SCOPES = 50
CODE_CHALLENGE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 §4.2: BASE64URL(SHA256) is 43
MAX_NONCE_LENGTH = 255  # the grant's column width
# How long a spent authorization code is remembered, so that a replay revokes what it bought.
SPENT_CODE_SECONDS = 3600

logger = logging.getLogger(__name__)


def _spent_code_key(client_id: Any, code: str) -> str:
    digest = hashlib.sha256(f"{client_id}\x00{code}".encode()).hexdigest()
    return f"mcp:oauth:spent-code:{digest}"


def oauth_tenant_for_resource(uri: Any) -> Tenant | None:
    """The active OAuth-mode tenant whose canonical URI this resource indicator names, or None."""
    slug = resources.slug_for_resource(uri) if isinstance(uri, str) else None
    return oauth_tenant_by_slug(slug)


def oauth_tenant_by_slug(slug: Any) -> Tenant | None:
    if not isinstance(slug, str) or not slug:
        return None
    tenant = Tenant.objects.filter(slug=slug, is_active=True, auth_mode=AuthMode.OAUTH).first()
    if tenant is not None:
        # The rest of this request (its tools' scopes, the user's membership) reads this tenant's rows.
        wall.admit(tenant.pk)
    return tenant


def is_member(user: Any, tenant: Tenant) -> bool:
    """Only a member (any role; superusers count as owners) may let a client act on a tenant."""
    return access.role_of(user, tenant) is not None


def member_oauth_tenants(user: Any) -> list[Tenant]:
    """The active OAuth-mode tenants this user may grant access to."""
    tenants = Tenant.objects.filter(is_active=True, auth_mode=AuthMode.OAUTH)
    tenant_ids = access.tenant_ids_for(user)
    if tenant_ids is not None:
        tenants = tenants.filter(pk__in=tenant_ids)
    return list(tenants.order_by("slug"))


def tool_scopes(tenant: Tenant) -> set[str]:
    return set(Tool.objects.needing_scopes(tenant).values_list("required_scope", flat=True))


def grantable_scopes(tenant: Tenant) -> set[str]:
    """The base scopes, offline_access and every tool's required scope of this tenant."""
    return set(scopes.BASE_SCOPES) | {OFFLINE_ACCESS} | tool_scopes(tenant)


def requested_resources(request: Request) -> list[str]:
    """Every `resource` value of an oauthlib request (oauthlib itself keeps only the last one)."""
    value = getattr(request, "resource", None)
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    query = urlsplit(request.uri or "").query
    values = [v for k, v in parse_qsl(query, keep_blank_values=True) if k == "resource"]
    values += [v for k, v in (request.decoded_body or []) if k == "resource"]
    if values:
        return values
    return [value] if isinstance(value, str) and value else []


def _invalid_target(request: Request, description: str) -> errors.CustomOAuth2Error:
    return errors.CustomOAuth2Error(
        error="invalid_target", description=description, status_code=400, request=request
    )


def tenant_for_request(request: Request) -> Tenant | None:
    """The tenant an authorization request names; None when it names none (AMB-24); invalid_target else."""
    values = requested_resources(request)
    if not values:
        return None
    if len(values) > 1:
        raise _invalid_target(request, "Ask for one MCP server (one resource) per authorization.")
    tenant = oauth_tenant_for_resource(values[0])
    if tenant is None:
        raise _invalid_target(
            request, "The resource is not an MCP endpoint of this server that uses OAuth (/t/<tenant>/mcp)."
        )
    return tenant


def is_identity_request(request: Request) -> bool:
    """A sign-in client's request for who the person is, naming no tenant (AMB-214)."""
    return sign_in.is_identity_request(request.scopes or [], request.client, requested_resources(request))


class McpOAuth2Validator(OAuth2Validator):
    """DOT's validator with tenant audiences, tenant scopes and membership checks."""

    # The id_token's claims and the scope each needs (DOT's table, plus the account's groups).
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": sign_in.OPENID}

    def get_additional_claims(self, request: Request) -> dict[str, Any]:
        return sign_in.claims(request.user)

    def validate_authorization_extras(self, request: Request) -> dict[str, Any]:
        """Pre-authorization checks oauthlib lacks: one known resource, a well-formed PKCE challenge."""
        challenge = request.code_challenge
        if challenge is not None and not CODE_CHALLENGE.match(challenge):
            raise errors.InvalidRequestError(
                description="code_challenge must be 43-128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636).",
                request=request,
            )
        nonce = request.nonce
        if isinstance(nonce, str) and len(nonce) > MAX_NONCE_LENGTH:
            raise errors.InvalidRequestError(description="nonce is too long.", request=request)
        tenant_for_request(request)
        return {}

    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        if len(scopes) > MAX_SCOPES or not all(SCOPE_TOKEN.match(scope) for scope in scopes):
            return False
        if request.grant_type == service_clients.GRANT:
            return True  # against the client's own tenant and scope: validate_service_client
        if sign_in.asks_identity(scopes):
            # Identity scopes come alone, from a sign-in client, for no MCP server (AMB-214).
            return sign_in.is_identity_request(scopes, client, requested_resources(request))
        # Called only for authorization requests (the code, implicit and password flows; the last two are off).
        tenant = tenant_for_request(request)
        if tenant is None:
            # No resource yet: the consent page offers only tenants that can grant all of these,
            # and the approval re-validates against the chosen one (AMB-24).
            return True
        return set(scopes) <= grantable_scopes(tenant)

    def get_default_scopes(self, client_id: str, request: Request, *args: Any, **kwargs: Any) -> list[str]:
        if request.grant_type == service_clients.GRANT:
            return []  # all the client may have: validate_service_client
        return super().get_default_scopes(client_id, request, *args, **kwargs)

    def validate_service_client(self, request: Request) -> dict[str, Any]:
        """The client credentials grant's last check: a tenant's service client, for that tenant (AMB-197)."""
        # Kept on oauthlib's request (which takes any attribute; its stubs declare its own only).
        vars(request)["service_client"] = service_clients.token_request(request, requested_resources(request))
        return {}

    def _create_access_token(self, expires: Any, request: Request, token: dict, *args: Any, **kwargs: Any) -> Any:
        if request.grant_type == service_clients.GRANT:
            # DOT gives a client credentials token no user; ours acts as the member the owner chose.
            request.user = vars(request)["service_client"].application.user
        return super()._create_access_token(expires, request, token, *args, **kwargs)

    def save_authorization_code(
        self, client_id: str, code: dict, request: Request, *args: Any, **kwargs: Any
    ) -> None:
        if is_identity_request(request):
            super().save_authorization_code(client_id, code, request, *args, **kwargs)
            return
        # The last gate before a grant exists: one tenant, named canonically, approved by its member.
        tenant = tenant_for_request(request)
        if tenant is None:
            raise _invalid_target(request, "Choose the MCP server to grant access to.")
        if not is_member(request.user, tenant):
            raise errors.AccessDeniedError(
                description="Only members of this MCP server can grant access to it.", request=request
            )
        vars(request)["resource"] = [resources.canonical_uri(tenant.slug)]
        super().save_authorization_code(client_id, code, request, *args, **kwargs)

    def save_bearer_token(self, token: dict, request: Request, *args: Any, **kwargs: Any) -> None:
        super().save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type != "authorization_code" or not request.code:
            return
        # Remember what this code bought: a replay of the code revokes it (OAuth 2.1 §4.1.3).
        access = get_access_token_model().objects.filter(
            token_checksum=tokens.checksum(token["access_token"])
        )
        refresh = get_refresh_token_model().objects.filter(
            token_checksum=tokens.checksum(token.get("refresh_token") or "")
        )
        issued = {
            "access": list(access.values_list("pk", flat=True)),
            "families": [str(f) for f in refresh.values_list("token_family", flat=True) if f],
        }
        cache.set(_spent_code_key(request.client_id, request.code), issued, SPENT_CODE_SECONDS)

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        key = _spent_code_key(client_id, code)
        issued = cache.get(key)
        if issued:
            cache.delete(key)
            self._revoke_issued(issued)
            logger.warning("authorization code of client %s replayed: its tokens are revoked", client_id)
        return False

    @staticmethod
    def _revoke_issued(issued: dict[str, list]) -> None:
        refresh_model = get_refresh_token_model()
        for family in issued.get("families", []):
            # The whole rotation family: tokens refreshed from the code's pair go too.
            refresh_model.revoke_family(family)
        get_access_token_model().objects.filter(pk__in=issued.get("access", [])).delete()

    def _check_and_set_request_resource(self, request: Request) -> None:
        raw = getattr(request, "resource", None)
        if isinstance(raw, str):
            values = [v for k, v in (request.decoded_body or []) if k == "resource"] or [raw]
        elif isinstance(raw, list):
            values = raw
        else:
            values = []
        canonical = []
        for value in values:
            tenant = oauth_tenant_for_resource(value)
            if tenant is None:
                raise _invalid_target(
                    request, "The resource is not an MCP endpoint of this server that uses OAuth."
                )
            canonical.append(resources.canonical_uri(tenant.slug))
        # Compared with the grant's (canonical) resource by DOT: a different tenant is invalid_target.
        vars(request)["resource"] = canonical
        super()._check_and_set_request_resource(request)
        if not request.resource and is_identity_request(request):
            # A sign-in client's token: bound to the provider itself, which no MCP endpoint or API accepts.
            vars(request)["resource"] = [resources.issuer()]
        if not request.resource:
            # Tokens without an audience are never issued (the resource server would refuse them anyway).
            raise _invalid_target(request, "This grant is not bound to an MCP endpoint.")
