"""Access tokens of a tenant's own identity provider (Okta, Entra, Keycloak, Google...): AMB-203..206.

A tenant whose `identity` names an issuer takes that issuer's access tokens at its endpoint: a JWT is
checked here against the issuer's JWKS (the tenant's algorithms, asymmetric only; `iss`, `aud`, `exp`,
`nbf` with MCP_IDENTITY_LEEWAY_SECONDS of leeway, a `sub`), an opaque token is asked about at the
issuer's RFC 7662 introspection endpoint with the tenant's client credentials. Either gives a `Caller`
with no user id, its subject `<issuer>#<sub>`, its client from `client_id` or `azp`, and its scopes
from the tenant's scope claim (`scope`, space-separated, or `scp`, a list). With
`keep_platform_tokens`, a token that is not a JWT is first looked up as one of ours.

Hostile callers are bounded: an accepted token is remembered by its checksum (never the token) until
min(exp, MCP_IDENTITY_CACHE_SECONDS), so a repeated token costs no signature check or introspection; a
refused one is remembered as long. The JWKS is kept per tenant MCP_IDENTITY_JWKS_SECONDS; a `kid` it
lacks (the issuer rotated its keys, or someone made it up) fetches it again at most once per
MCP_IDENTITY_JWKS_REFETCH_SECONDS, and concurrent fetches of one tenant share one request. Every fetch
goes through the SSRF guard and a client pinned to the vetted address (federation/transport.py),
within MCP_IDENTITY_FETCH_SECONDS and MAX_BYTES; an issuer that cannot be reached gives `Unavailable`
(503) at once. Introspections run at most MAX_INTROSPECTIONS at a time per tenant. The token itself is
never passed on: tools and upstreams see the Caller only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx2
from django.conf import settings
from joserfc import jws, jwt
from joserfc.errors import BadSignatureError, JoseError
from joserfc.jwk import JWKRegistry

from mcp_app.core import ssrf
from mcp_app.core.context import Caller, kept_claims
from mcp_app.core.types import ASYMMETRIC_ALGORITHMS, ExternalIdentity, TenantInfo
from mcp_app.federation import transport
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets
from mcp_app.infra.cache import Cache
from mcp_app.oauth import tokens
from mcp_app.oauth.tokens import InvalidToken

MAX_BYTES = 256 * 1024  # a JWKS or an introspection answer past this is refused unread
MAX_ENTRIES = 10_000  # remembered verdicts, each kind
MAX_INTROSPECTIONS = 8  # at once per tenant and event loop

# Why a token is refused; the wording reaches the client as error_description.
MALFORMED = "The access token is not a well-formed JWT."
NOT_JWT = "The access token is not a JWT of this endpoint's identity provider."
BAD_SIGNATURE = "The access token's signature does not verify against the identity provider's keys."
UNKNOWN_KID = "The access token's signing key (kid) is not among the identity provider's published keys."
WRONG_ISSUER = "The access token was issued by another issuer than this endpoint's identity provider."
WRONG_AUDIENCE = "The access token's audience (aud) is not this endpoint."
EXPIRED = "The access token has expired."
NOT_YET_VALID = "The access token is not valid yet (nbf)."
NO_EXPIRY = "The access token has no expiry (exp)."
NO_SUBJECT = "The access token names no subject (sub)."
INACTIVE = "The access token is not active: the identity provider says it is revoked, expired or unknown."


class Unavailable(Exception):
    """The identity provider could not be asked; `reason` is ours and safe to tell the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Keys:
    """One tenant's copy of its issuer's JWKS."""

    by_kid: dict[str, Any] = field(default_factory=dict)
    fetched_at: float = -1e9  # monotonic; never
    tried_at: float = -1e9  # the last fetch, whatever came of it
    error: str = ""  # why the last fetch failed, while no keys were ever had

    def find(self, kid: Any) -> Any:
        if isinstance(kid, str):
            return self.by_kid.get(kid)
        # No kid: only an issuer with a single key can be meant.
        return next(iter(self.by_kid.values())) if len(self.by_kid) == 1 else None


_keys: dict[tuple[int, str], _Keys] = {}
_fetching: dict[tuple[int, int, str], asyncio.Future[_Keys]] = {}
_slots: dict[tuple[int, int], asyncio.Semaphore] = {}
# (tenant id, its identity, token checksum) -> the Caller (pool ACCEPTED) or the refusal's reason (REFUSED),
# each pool bounded on its own. Nothing evicts them early: the issuer revokes, and tells no one.
ACCEPTED, REFUSED = 0, 1
_verdicts = Cache("identity", MAX_ENTRIES, pools=2)


def unreachable_urls(identity: Any) -> list[str]:
    """What the SSRF guard refuses of an identity's URLs without DNS (a private address not allow-listed,
    a metadata host), each in words: the admin, the API and the import refuse to save them."""
    if not isinstance(identity, dict):
        return []
    found = []
    for name in ("jwks_uri", "introspection_url"):
        url = identity.get(name)
        if isinstance(url, str) and url:
            try:
                ssrf.check_url_statically(url)
            except ssrf.SsrfRefused as refused:
                said = refused.message.replace("The tool's URL", "The URL")
                found.append(f"{name}: {said}")
    return found


def reset() -> None:
    """Forget every key set and verdict (tests)."""
    _keys.clear()
    _fetching.clear()
    _slots.clear()
    _verdicts.clear()


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


async def authenticate(token: str, tenant: TenantInfo) -> Caller:
    """The caller a bearer token names at a tenant with its own identity provider.

    InvalidToken (401) when the token gives no access here, Unavailable (503) when the identity
    provider could not say.
    """
    identity = tenant.identity
    assert identity is not None
    if identity.keep_platform_tokens and not looks_like_jwt(token):
        try:
            grant = await tokens.verify(token, tenant)
            return Caller(
                user_id=grant.user_id, client_id=grant.client_id, scopes=grant.scopes, role=grant.role
            )
        except InvalidToken:
            if not identity.introspection_url:
                raise
    key = (tenant.id, identity, tokens.checksum(token))
    if isinstance(hit := _verdicts.get(key), Caller):
        return hit
    if isinstance(hit, str):
        raise InvalidToken(hit)
    mark = _verdicts.mark()
    try:
        if identity.jwks_uri and looks_like_jwt(token):
            caller, expires = await _verify_jwt(token, tenant.id, identity)
        elif identity.introspection_url:
            caller, expires = await _introspect(token, tenant.id, identity)
        else:
            raise InvalidToken(NOT_JWT)
    except InvalidToken as refused:
        _verdicts.put(key, refused.reason, mark, float(settings.MCP_IDENTITY_CACHE_SECONDS), REFUSED)
        raise
    # Until min(its expiry (epoch seconds), now + MCP_IDENTITY_CACHE_SECONDS).
    seconds = min(float(settings.MCP_IDENTITY_CACHE_SECONDS), expires - time.time())
    _verdicts.put(key, caller, mark, seconds, ACCEPTED)
    return caller


# --- JWTs ------------------------------------------------------------------------------------------


async def _verify_jwt(token: str, tenant_id: int, identity: ExternalIdentity) -> tuple[Caller, float]:
    try:
        header = jws.extract_compact(token.encode("ascii")).protected
    except (JoseError, ValueError, TypeError):
        raise InvalidToken(MALFORMED) from None
    alg = header.get("alg")
    if alg not in identity.algorithms or alg not in ASYMMETRIC_ALGORITHMS:
        raise InvalidToken(
            f"The access token is signed with {str(alg)[:16]!r}, which this endpoint does not accept "
            f"(it takes {', '.join(identity.algorithms)})."
        )
    key = await _key(tenant_id, identity, header.get("kid"))
    try:
        claims = jwt.decode(token, key, algorithms=[alg]).claims
    except BadSignatureError:
        raise InvalidToken(BAD_SIGNATURE) from None
    except (JoseError, ValueError, TypeError):
        raise InvalidToken(MALFORMED) from None
    if claims.get("iss") != identity.issuer:
        raise InvalidToken(WRONG_ISSUER)
    return _caller(claims, identity)


async def _key(tenant_id: int, identity: ExternalIdentity, kid: Any) -> Any:
    """The issuer's key named `kid`: from the kept JWKS, or after one more fetch when it lacks it."""
    uri = identity.jwks_uri
    keys = _keys.get((tenant_id, uri))
    now = time.monotonic()
    refetch = float(settings.MCP_IDENTITY_JWKS_REFETCH_SECONDS)
    if keys is not None and keys.error and now - keys.tried_at < max(refetch, 1.0):
        raise Unavailable(keys.error)  # an unreachable issuer is not asked again for every token
    stale = keys is not None and now - keys.fetched_at >= float(settings.MCP_IDENTITY_JWKS_SECONDS)
    # Stale keys still serve while the issuer cannot be reached: asked again once per interval only.
    if keys is None or (stale and now - keys.tried_at >= max(refetch, 1.0)):
        keys = await _refresh(tenant_id, uri, keys)
    found = keys.find(kid)
    if found is None and time.monotonic() - keys.tried_at >= refetch:
        keys = await _refresh(tenant_id, uri, keys)
        found = keys.find(kid)
    if found is None:
        raise InvalidToken(UNKNOWN_KID)
    return found


async def _refresh(tenant_id: int, uri: str, kept: _Keys | None) -> _Keys:
    """Fetch the JWKS once for every concurrent caller; a failed fetch keeps the keys we had."""
    loop = asyncio.get_running_loop()
    flight = (id(loop), tenant_id, uri)
    pending = _fetching.get(flight)
    if pending is None:
        pending = _fetching[flight] = asyncio.ensure_future(_fetch_keys(tenant_id, uri, kept))
        pending.add_done_callback(lambda _f: _fetching.pop(flight, None))
    return await asyncio.shield(pending)  # a caller that goes away must not cancel the others' fetch


async def _fetch_keys(tenant_id: int, uri: str, kept: _Keys | None) -> _Keys:
    if kept is not None:
        kept.tried_at = time.monotonic()  # a failure below must not make the next token fetch again
    try:
        status, body = await _request("GET", uri, "its JWKS")
        if status != 200:
            raise Unavailable(f"The identity provider's JWKS answered HTTP {status}.")
        fresh = _Keys(by_kid=_parse_jwks(body), fetched_at=time.monotonic(), tried_at=time.monotonic())
    except Unavailable as failed:
        if kept is not None and kept.by_kid:
            return kept
        _keys[(tenant_id, uri)] = _Keys(tried_at=time.monotonic(), error=failed.reason)
        raise
    _keys[(tenant_id, uri)] = fresh
    return fresh


def _parse_jwks(body: bytes) -> dict[str, Any]:
    """kid -> public key of a JWKS; symmetric, private, encryption-only and unreadable keys are left out."""
    try:
        listed = json.loads(body).get("keys")
    except (ValueError, AttributeError):
        raise Unavailable("The identity provider's JWKS is not JSON with a `keys` list.") from None
    if not isinstance(listed, list):
        raise Unavailable("The identity provider's JWKS is not JSON with a `keys` list.")
    found: dict[str, Any] = {}
    for index, entry in enumerate(listed[:100]):
        if (
            not isinstance(entry, dict)
            or entry.get("kty") not in ("RSA", "EC", "OKP")
            or entry.get("use") == "enc"
        ):
            continue
        public = {
            name: value for name, value in entry.items() if name not in ("d", "p", "q", "dp", "dq", "qi")
        }
        try:
            key = JWKRegistry.import_key(public)
        except (JoseError, ValueError, TypeError):
            continue
        found[str(entry.get("kid") or f"#{index}")] = key
    return found


# --- opaque tokens: RFC 7662 introspection --------------------------------------------------------


async def _introspect(token: str, tenant_id: int, identity: ExternalIdentity) -> tuple[Caller, float]:
    try:
        secret = decrypt_secrets(identity.client_secret).get("client_secret", "")
    except SecretsError:
        raise Unavailable(
            "The introspection client's secret cannot be read; an owner must enter it again."
        ) from None
    if not secret:
        raise Unavailable("The introspection client's secret is not set; an owner must enter it.")
    pair = f"{quote(identity.client_id, safe='')}:{quote(secret, safe='')}"
    headers = {
        "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
        "Accept": "application/json",
    }
    form = {"token": token, "token_type_hint": "access_token"}
    slot = _slots.setdefault(
        (id(asyncio.get_running_loop()), tenant_id), asyncio.Semaphore(MAX_INTROSPECTIONS)
    )
    try:
        async with asyncio.timeout(float(settings.MCP_IDENTITY_FETCH_SECONDS)):
            await slot.acquire()
    except TimeoutError:
        raise Unavailable(
            "The identity provider's introspection endpoint is busy with this endpoint's tokens."
        ) from None
    try:
        status, body = await _request(
            "POST", identity.introspection_url, "its introspection endpoint", data=form, headers=headers
        )
    finally:
        slot.release()
    if status != 200:
        raise Unavailable(f"The identity provider's introspection endpoint answered HTTP {status}.")
    try:
        claims = json.loads(body)
    except ValueError:
        claims = None
    if not isinstance(claims, dict):
        raise Unavailable("The identity provider's introspection answer is not a JSON object.")
    if claims.get("active") is not True:
        raise InvalidToken(INACTIVE)
    if "iss" in claims and claims["iss"] != identity.issuer:
        raise InvalidToken(WRONG_ISSUER)
    if not claims.get("sub") and isinstance(claims.get("username"), str):
        claims["sub"] = claims["username"]
    return _caller(claims, identity)


# --- shared -----------------------------------------------------------------------------------------


def _caller(claims: dict[str, Any], identity: ExternalIdentity) -> tuple[Caller, float]:
    """The Caller of verified claims and when it stops being valid (epoch seconds); InvalidToken if none."""
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
    if identity.audience not in audiences:
        raise InvalidToken(WRONG_AUDIENCE)
    now = time.time()
    leeway = float(settings.MCP_IDENTITY_LEEWAY_SECONDS)
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        raise InvalidToken(NO_EXPIRY)
    if now > expires + leeway:
        raise InvalidToken(EXPIRED)
    not_before = claims.get("nbf")
    if isinstance(not_before, int | float) and now + leeway < not_before:
        raise InvalidToken(NOT_YET_VALID)
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise InvalidToken(NO_SUBJECT)
    client = claims.get("client_id") or claims.get("azp")
    caller = Caller(
        user_id=None,
        client_id=client if isinstance(client, str) and client else None,
        scopes=mapped(identity, _scopes(claims.get(identity.scope_claim))),
        subject=f"{identity.issuer}#{subject}",
        claims=kept_claims(claims),
    )
    return caller, float(expires) + leeway


def mapped(identity: ExternalIdentity, theirs: frozenset[str]) -> frozenset[str]:
    """The token's scopes and ours that its provider's scopes grant by the tenant's `scope_map` (AMB-217)."""
    granted = set(theirs)
    for scope, ours in identity.scope_map:
        if scope in theirs:
            granted.update(ours)
    return frozenset(granted)


def _scopes(value: Any) -> frozenset[str]:
    """`scope` is a space-separated string (RFC 8693, RFC 7662), `scp` a list (Entra, Okta); take both forms."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str) and item and " " not in item)
    return frozenset()


async def _request(method: str, url: str, what: str, **options: Any) -> tuple[int, bytes]:
    """One request to the identity provider through the SSRF guard, within the fetch deadline and size cap."""
    seconds = float(settings.MCP_IDENTITY_FETCH_SECONDS)
    try:
        async with asyncio.timeout(seconds):
            client = await transport.open_http_client(url, (), seconds)
            async with client, client.stream(method, url, **options) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise Unavailable(f"The identity provider's answer from {what} is too large.")
                return response.status_code, bytes(body)
    except ssrf.SsrfRefused as refused:
        raise Unavailable(
            f"The identity provider ({what}) may not be reached: "
            + refused.message.replace("The tool's URL", "its URL")
        ) from None
    except TimeoutError:
        raise Unavailable(f"The identity provider ({what}) did not answer within {seconds:g} s.") from None
    except httpx2.HTTPError:
        raise Unavailable(f"The identity provider ({what}) could not be reached.") from None
