"""A small OAuth 2 authorization server on joserfc, run by the tests as its own uvicorn process.

It stands for a tenant's own identity provider (Okta, Entra, Keycloak): RFC 8414 metadata, a JWKS,
the client credentials grant issuing JWT access tokens (or opaque ones, `token_format=opaque`), RFC 7662
introspection (its own client's Basic credentials), RFC 7009 revocation, and key rotation. For the
tests' hostile cases it also signs whatever claims it is given (`/test/mint`) and counts the JWKS
fetches (`/test/stats`). Run: `IDP_ISSUER=http://127.0.0.1:<port> uvicorn tests.oauth.idp_server:app`.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ISSUER = os.environ.get("IDP_ISSUER", "http://127.0.0.1")
CLIENTS = {"app": "app-secret"}  # clients that get tokens
INTROSPECTORS = {"rs": "rs-secret"}  # resource servers that may introspect

state: dict[str, Any] = {
    # Each server's own first kid: two providers' keys never share one.
    "key": RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(4), "use": "sig", "alg": "RS256"}),
    "generation": 1,
    "jwks_fetches": 0,
    "opaque": {},  # token -> claims
    "revoked": set(),
}


def _basic(request: Request, known: dict[str, str]) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        client, _, secret = base64.b64decode(value).decode().partition(":")
    except ValueError:
        return None
    return client if known.get(client) == secret else None


def sign(claims: dict[str, Any], kid: str | None = None) -> str:
    key = state["key"]
    return jwt.encode({"alg": "RS256", "typ": "at+jwt", "kid": kid or key.kid}, claims, key)


async def metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": ISSUER,
            "jwks_uri": f"{ISSUER}/jwks",
            "token_endpoint": f"{ISSUER}/token",
            "introspection_endpoint": f"{ISSUER}/introspect",
            "revocation_endpoint": f"{ISSUER}/revoke",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        }
    )


async def jwks(request: Request) -> Response:
    state["jwks_fetches"] += 1
    return JSONResponse({"keys": [state["key"].as_dict(private=False)]})


async def token(request: Request) -> Response:
    client = _basic(request, CLIENTS)
    if client is None:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    form = await request.form()
    if form.get("grant_type") != "client_credentials":
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": str(form.get("subject") or client),  # a real server's user; the tests choose one
        "aud": str(form.get("resource") or ""),
        "client_id": client,
        "scope": str(form.get("scope") or ""),
        "iat": now,
        "exp": now + 300,
        "jti": secrets.token_hex(8),
    }
    if form.get("token_format") == "opaque":
        value = secrets.token_urlsafe(32)
        state["opaque"][value] = claims
    else:
        value = sign(claims)
    return JSONResponse({"access_token": value, "token_type": "Bearer", "expires_in": 300})


async def introspect(request: Request) -> Response:
    if _basic(request, INTROSPECTORS) is None:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    value = str((await request.form()).get("token") or "")
    claims = state["opaque"].get(value)
    if claims is None or value in state["revoked"] or claims["exp"] < time.time():
        return JSONResponse({"active": False})
    return JSONResponse({"active": True, "token_type": "Bearer", **claims})


async def revoke(request: Request) -> Response:
    if _basic(request, CLIENTS) is None:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    state["revoked"].add(str((await request.form()).get("token") or ""))
    return Response(status_code=200)


async def mint(request: Request) -> Response:
    body = await request.json()
    claims = body["claims"]
    if body.get("opaque"):
        value = secrets.token_urlsafe(32)
        state["opaque"][value] = claims
        return JSONResponse({"access_token": value})
    return JSONResponse({"access_token": sign(claims, body.get("kid"))})


async def rotate(request: Request) -> Response:
    state["generation"] += 1
    kid = f"k{state['generation']}"
    state["key"] = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
    return JSONResponse({"kid": kid})


async def stats(request: Request) -> Response:
    return JSONResponse({"jwks_fetches": state["jwks_fetches"], "kid": state["key"].kid})


app = Starlette(
    routes=[
        Route("/.well-known/oauth-authorization-server", metadata),
        Route("/jwks", jwks),
        Route("/token", token, methods=["POST"]),
        Route("/introspect", introspect, methods=["POST"]),
        Route("/revoke", revoke, methods=["POST"]),
        Route("/test/mint", mint, methods=["POST"]),
        Route("/test/rotate", rotate, methods=["POST"]),
        Route("/test/stats", stats),
    ]
)
