"""Hostile clients against a real Daphne: one named row per attack, each with its exact expected answer.

Rows are named after the issue's list (issue 3, "a table of at least 30 hostile cases") and cite the
checklist ids. Every row builds what it needs (a fresh authorization code, a session, a published
metadata document) so the rows are independent; tokens that need no browser are stored straight
into the database by another process (`Ctx.minted`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.oauth_flow import (
    MINTING_CLIENT_ID,
    OTHER_USER,
    OUTSIDER,
    OUTSIDER_PASSWORD,
    REDIRECT_URI,
    SECOND_SLUG,
    SECURE_PASSWORD,
    SECURE_SLUG,
    SECURE_USER,
    DocumentServer,
    OAuthBrowser,
    authorize_url,
    callback_params,
    client_document,
    fresh_loopback,
    http_from,
    mint_code,
    pkce_pair,
    query_of,
    register,
    token_request,
    token_spec,
)
from tests.e2e.servers import DaphneServer, django_shell

pytestmark = [pytest.mark.e2e]

BASE_SCOPE = "mcp:tools mcp:prompts mcp:resources"
UNKNOWN = "The access token is unknown, revoked or malformed."
EXPIRED = "The access token has expired."
WRONG_AUDIENCE = "The access token was not issued for this MCP endpoint."
NOT_MEMBER = "The access token's user is not an active member of this tenant."


@dataclass
class Ctx:
    """What the rows share: the server, registered clients, tokens stored in the database."""

    server: DaphneServer
    docs: DocumentServer
    clients: dict[str, dict[str, Any]]
    minted: dict[str, str]

    @property
    def base(self) -> str:
        return self.server.url

    def canonical(self, slug: str = SECURE_SLUG) -> str:
        return self.server.mcp_url(slug)

    def prm(self, slug: str = SECURE_SLUG) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource/t/{slug}/mcp"

    def challenge(
        self, error: str | None = None, description: str | None = None, scope: str = BASE_SCOPE
    ) -> str:
        """The exact WWW-Authenticate of the secure tenant (DOT's comma-separated rendering)."""
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{description}"')
        parts.append(f'scope="{scope}"')
        parts.append(f'resource_metadata="{self.prm()}"')
        return "Bearer " + ",".join(parts)


@pytest.fixture(scope="module")
def ctx(oauth_server: DaphneServer, cimd_documents: DocumentServer) -> Ctx:
    source = fresh_loopback()

    def register_sync(**metadata: Any) -> dict[str, Any]:
        body = {
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            **metadata,
        }
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(base_url=oauth_server.url, transport=transport, timeout=REQUEST_SECONDS) as http:
            response = http.post("/oauth/register", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    clients = {
        "a": register_sync(client_name="Client A"),
        "b": register_sync(client_name="Client B"),
        "confidential": register_sync(
            client_name="Confidential C", token_endpoint_auth_method="client_secret_basic"
        ),
    }
    secure = [oauth_server.mcp_url(SECURE_SLUG)]
    specs = {
        "valid": token_spec(SECURE_USER, secure, BASE_SCOPE),
        "lowercase": token_spec(SECURE_USER, secure, BASE_SCOPE),
        "to_revoke": token_spec(SECURE_USER, secure, BASE_SCOPE),
        "second_tenant": token_spec(SECURE_USER, [oauth_server.mcp_url(SECOND_SLUG)], BASE_SCOPE),
        "expired": token_spec(SECURE_USER, secure, BASE_SCOPE, expires_in=-5),
        "empty_resource": token_spec(SECURE_USER, [], BASE_SCOPE),
        "parent_resource": token_spec(SECURE_USER, [oauth_server.url + "/"], BASE_SCOPE),
        "two_resources": token_spec(SECURE_USER, [*secure, oauth_server.mcp_url(SECOND_SLUG)], BASE_SCOPE),
        "outsider": token_spec(OUTSIDER, secure, BASE_SCOPE),
        "other_member": token_spec(OTHER_USER, secure, BASE_SCOPE),
        "tools_only": token_spec(SECURE_USER, secure, "mcp:tools"),
        "prompts_only": token_spec(SECURE_USER, secure, "mcp:prompts"),
    }
    django_shell(oauth_server.env, mint_code(list(specs.values())))
    return Ctx(
        server=oauth_server,
        docs=cimd_documents,
        clients=clients,
        minted={name: spec["token"] for name, spec in specs.items()},
    )


# --- helpers the rows use ----------------------------------------------------------------------


async def mcp_post(
    ctx: Ctx,
    body: dict[str, Any],
    token: str | None = None,
    *,
    scheme: str = "Bearer",
    session: str | None = None,
    query: str = "",
    slug: str = SECURE_SLUG,
) -> httpx.Response:
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"{scheme} {token}"
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-06-18"
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        return await http.post(ctx.server.mcp_url(slug) + query, json=body, headers=headers)


def initialize_body() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}


async def open_session(ctx: Ctx, token: str) -> str:
    response = await mcp_post(ctx, initialize_body(), token)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    notified = await mcp_post(
        ctx, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session=session
    )
    assert notified.status_code == 202, notified.text
    return session


async def consent_redirect(
    ctx: Ctx,
    *,
    client: str = "a",
    user: tuple[str, str] = (SECURE_USER, SECURE_PASSWORD),
    allow: bool = True,
    **params: str | None,
) -> httpx.Response:
    """Sign in as `user` and answer the consent page of an authorization request built from `params`."""
    query: dict[str, str | None] = {
        "response_type": "code",
        "client_id": ctx.clients[client]["client_id"] if client in ctx.clients else client,
        "redirect_uri": REDIRECT_URI,
        "state": "st-hostile",
        "code_challenge_method": "S256",
        "resource": ctx.canonical(),
        "scope": BASE_SCOPE,
    }
    query.update(params)
    browser = OAuthBrowser(ctx.base, *user)
    try:
        return await browser.decide(authorize_url(ctx.base, **query), allow=allow)
    finally:
        await browser.aclose()


async def code_for(ctx: Ctx, client: str = "a", **params: str | None) -> tuple[str, str]:
    """A fresh authorization code for `client`, and its PKCE verifier."""
    verifier, challenge = pkce_pair()
    response = await consent_redirect(ctx, client=client, code_challenge=challenge, **params)
    return callback_params(response)["code"], verifier


async def redeem(
    ctx: Ctx, code: str, verifier: str | None, client: str = "a", **extra: str
) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": ctx.clients[client]["client_id"],
        "resource": ctx.canonical(),
        **extra,
    }
    if verifier is not None:
        data["code_verifier"] = verifier
    return await token_request(ctx.base, **data)


async def authorize_anonymously(ctx: Ctx, **params: str | None) -> httpx.Response:
    """GET the authorization endpoint without a session: invalid requests are refused before sign-in."""
    _, challenge = pkce_pair()
    query: dict[str, str | None] = {
        "response_type": "code",
        "client_id": ctx.clients["a"]["client_id"],
        "redirect_uri": REDIRECT_URI,
        "state": "st-hostile",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": ctx.canonical(),
    }
    query.update(params)
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        return await http.get(authorize_url(ctx.base, **query))


# --- expected answers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """An exact answer: status, and whichever of these the row pins down."""

    status: int
    www_authenticate: str | None = None
    json: dict[str, Any] | None = None
    json_error: str | None = None  # RFC 6749/7591 `error` when the description is free text
    redirect: dict[str, str] | None = None  # the exact query of a redirect to REDIRECT_URI
    page_says: str | None = None  # an error page (never a redirect) containing this text
    headers: dict[str, str] = field(default_factory=dict)


def check(response: httpx.Response, expect: Expect, ctx: Ctx) -> None:
    alert = re.findall(r'role="alert">(.*?)</p>', response.text, flags=re.S)
    shown = f"HTTP {response.status_code} {dict(response.headers)!r} alert={alert!r} {response.text[:300]!r}"
    assert response.status_code == expect.status, shown
    if expect.www_authenticate is not None:
        assert response.headers.get("www-authenticate") == expect.www_authenticate, shown
    if expect.json is not None:
        assert response.json() == expect.json, shown
    if expect.json_error is not None:
        body = response.json()
        assert body["error"] == expect.json_error, shown
        assert "error_description" not in body or isinstance(body["error_description"], str)
    if expect.redirect is not None:
        location = response.headers.get("location", "")
        assert location.split("?")[0] == REDIRECT_URI, shown
        got = query_of(location)
        got.pop("error_description", None)
        assert got == expect.redirect, shown
    if expect.page_says is not None:
        assert "location" not in response.headers, shown
        assert response.headers["content-type"].startswith("text/html"), shown
        assert expect.page_says in response.text, shown
    for name, value in expect.headers.items():
        assert response.headers.get(name) == value, shown


Row = Callable[[Ctx], Awaitable[tuple[httpx.Response, Expect]]]
ROWS: dict[str, Row] = {}


def row(name: str) -> Callable[[Row], Row]:
    def add(fn: Row) -> Row:
        ROWS[name] = fn
        return fn

    return add


# --- resource server: the MCP endpoint -----------------------------------------------------------


@row("au13_no_token_gets_401_with_resource_metadata_and_no_error")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    return await mcp_post(ctx, initialize_body()), Expect(401, ctx.challenge())


@row("au13_basic_scheme_counts_as_no_bearer_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), "dXNlcjpwYXNz", scheme="Basic")
    return response, Expect(401, ctx.challenge())


@row("au42_unknown_token_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), "made-up-token-0123456789")
    return response, Expect(401, ctx.challenge("invalid_token", UNKNOWN))


@row("au42_malformed_token_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), 'abc"def,ghi')
    return response, Expect(401, ctx.challenge("invalid_token", UNKNOWN))


@row("au41_wrong_audience_tenant_a_token_at_tenant_b_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["second_tenant"])
    return response, Expect(401, ctx.challenge("invalid_token", WRONG_AUDIENCE))


@row("au41_token_with_empty_resource_is_never_accepted")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["empty_resource"])
    return response, Expect(401, ctx.challenge("invalid_token", WRONG_AUDIENCE))


@row("au41_token_bound_to_the_parent_url_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["parent_resource"])
    return response, Expect(401, ctx.challenge("invalid_token", WRONG_AUDIENCE))


@row("au41_token_bound_to_two_tenants_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["two_resources"])
    return response, Expect(401, ctx.challenge("invalid_token", WRONG_AUDIENCE))


@row("au42_expired_token_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["expired"])
    return response, Expect(401, ctx.challenge("invalid_token", EXPIRED))


@row("au42_revoked_token_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    token = ctx.minted["to_revoke"]
    assert (await mcp_post(ctx, initialize_body(), token)).status_code == 200
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        revoked = await http.post(
            f"{ctx.base}/oauth/revoke", data={"token": token, "client_id": MINTING_CLIENT_ID}
        )
    assert revoked.status_code == 200, revoked.text
    return await mcp_post(ctx, initialize_body(), token), Expect(401, ctx.challenge("invalid_token", UNKNOWN))


@row("au44_token_of_a_user_who_is_not_a_member_is_invalid_token")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), ctx.minted["outsider"])
    return response, Expect(401, ctx.challenge("invalid_token", NOT_MEMBER))


@row("au30_token_in_the_query_string_is_invalid_request")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await mcp_post(ctx, initialize_body(), query=f"?access_token={ctx.minted['valid']}")
    description = "Access tokens are not accepted in the query string; send Authorization: Bearer."
    return response, Expect(400, ctx.challenge("invalid_request", description))


@row("au30_token_in_the_query_string_is_refused_even_next_to_a_valid_header")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    token = ctx.minted["valid"]
    response = await mcp_post(ctx, initialize_body(), token, query=f"?access_token={token}")
    description = "Access tokens are not accepted in the query string; send Authorization: Bearer."
    return response, Expect(400, ctx.challenge("invalid_request", description))


@row("rfc6750_lowercase_bearer_scheme_is_accepted_case_insensitively")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    # RFC 7235 §2.1: auth schemes are case-insensitive; the README records this decision.
    response = await mcp_post(ctx, initialize_body(), ctx.minted["lowercase"], scheme="bearer")
    return response, Expect(200)


@row("sec03_session_id_with_another_users_token_is_404")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    session = await open_session(ctx, ctx.minted["valid"])
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    response = await mcp_post(ctx, body, ctx.minted["other_member"], session=session)
    return response, Expect(404)


@row("au_insufficient_scope_for_a_tool_is_403_with_the_exact_step_up_challenge")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    token = ctx.minted["tools_only"]
    session = await open_session(ctx, token)
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_vault", "arguments": {}},
    }
    response = await mcp_post(ctx, body, token, session=session)
    description = "Calling tool 'read_vault' needs the scope(s) secure:vault, which the access token lacks."
    return response, Expect(403, ctx.challenge("insufficient_scope", description, "mcp:tools secure:vault"))


@row("au_insufficient_scope_for_a_method_family_is_403")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    token = ctx.minted["prompts_only"]
    session = await open_session(ctx, token)
    response = await mcp_post(
        ctx, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, token, session=session
    )
    description = "This request needs the scope(s) mcp:tools, which the access token lacks."
    return response, Expect(403, ctx.challenge("insufficient_scope", description, "mcp:prompts mcp:tools"))


# --- authorization endpoint ----------------------------------------------------------------------


@row("au31_missing_pkce_is_invalid_request_with_state_and_iss")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, code_challenge=None, code_challenge_method=None)
    return response, Expect(
        302, redirect={"error": "invalid_request", "state": "st-hostile", "iss": ctx.base}
    )


@row("au31_plain_pkce_is_invalid_request")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, code_challenge="x" * 43, code_challenge_method="plain")
    return response, Expect(
        302, redirect={"error": "invalid_request", "state": "st-hostile", "iss": ctx.base}
    )


@row("au32_redirect_uri_mismatch_gets_an_error_page_not_a_redirect")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, redirect_uri="http://127.0.0.1:33419/other")
    return response, Expect(400, page_says="Mismatching redirect URI")


@row("au32_open_redirect_to_another_host_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, redirect_uri="https://evil.example/callback")
    return response, Expect(400, page_says="Mismatching redirect URI")


@row("au32_open_redirect_scheme_relative_double_slash_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, redirect_uri="//evil.example/callback")
    return response, Expect(400, page_says="Invalid redirect URI")


@row("au32_open_redirect_with_backslashes_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(
        ctx, redirect_uri="http://127.0.0.1:33419\\\\evil.example/callback"
    )
    return response, Expect(400, page_says="Invalid redirect URI.")


@row("au32_open_redirect_with_userinfo_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, redirect_uri="http://127.0.0.1:33419@evil.example/callback")
    return response, Expect(400, page_says="Invalid redirect URI.")


@row("au32_unknown_client_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, client_id="no-such-client")
    return response, Expect(400, page_says="Invalid client_id parameter value")


@row("au34_resource_of_an_unknown_tenant_is_invalid_target")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, resource=ctx.canonical("no-such-tenant"))
    return response, Expect(302, redirect={"error": "invalid_target", "state": "st-hostile", "iss": ctx.base})


@row("au35_resource_with_a_fragment_is_invalid_target")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, resource=ctx.canonical() + "#frag")
    return response, Expect(302, redirect={"error": "invalid_target", "state": "st-hostile", "iss": ctx.base})


@row("amb30_resource_of_a_public_tenant_is_invalid_target")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, resource=ctx.canonical("demo"))
    return response, Expect(302, redirect={"error": "invalid_target", "state": "st-hostile", "iss": ctx.base})


@row("au34_resource_on_another_host_is_invalid_target")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, resource=f"https://evil.example/t/{SECURE_SLUG}/mcp")
    return response, Expect(302, redirect={"error": "invalid_target", "state": "st-hostile", "iss": ctx.base})


@row("sec01_prompt_none_without_a_signed_in_user_is_login_required")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await authorize_anonymously(ctx, prompt="none")
    return response, Expect(302, redirect={"error": "login_required", "state": "st-hostile", "iss": ctx.base})


@row("sec01_prompt_none_cannot_skip_consent_of_a_signed_in_member")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    _, challenge = pkce_pair()
    browser = OAuthBrowser(ctx.base, SECURE_USER, SECURE_PASSWORD)
    try:
        await browser.sign_in()
        url = authorize_url(
            ctx.base,
            response_type="code",
            client_id=ctx.clients["a"]["client_id"],
            redirect_uri=REDIRECT_URI,
            state="st-hostile",
            code_challenge=challenge,
            code_challenge_method="S256",
            resource=ctx.canonical(),
            prompt="none",
        )
        response = await browser.open(url)
    finally:
        await browser.aclose()
    return response, Expect(
        302, redirect={"error": "consent_required", "state": "st-hostile", "iss": ctx.base}
    )


@row("sec04_non_member_cannot_grant_and_sees_a_403_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    _, challenge = pkce_pair()
    response = await consent_redirect(ctx, user=(OUTSIDER, OUTSIDER_PASSWORD), code_challenge=challenge)
    return response, Expect(403, page_says="is not one.")


@row("au37_denial_is_access_denied_with_state_and_iss")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    _, challenge = pkce_pair()
    response = await consent_redirect(ctx, allow=False, code_challenge=challenge)
    return response, Expect(302, redirect={"error": "access_denied", "state": "st-hostile", "iss": ctx.base})


# --- token endpoint ------------------------------------------------------------------------------


@row("au31_another_clients_code_is_invalid_grant")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx, client="a")
    response = await redeem(ctx, code, verifier, client="b")
    return response, Expect(400, json_error="invalid_grant")


@row("au31_code_reuse_is_invalid_grant")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx)
    first = await redeem(ctx, code, verifier)
    assert first.status_code == 200, first.text
    return await redeem(ctx, code, verifier), Expect(400, json_error="invalid_grant")


@row("au31_code_reuse_revokes_the_tokens_the_code_bought")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx)
    first = (await redeem(ctx, code, verifier)).json()
    replay = await redeem(ctx, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant", replay.text
    refresh = await token_request(
        ctx.base,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        client_id=ctx.clients["a"]["client_id"],
        resource=ctx.canonical(),
    )
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant", refresh.text
    response = await mcp_post(ctx, initialize_body(), first["access_token"])
    return response, Expect(401, ctx.challenge("invalid_token", UNKNOWN))


@row("au31_wrong_code_verifier_is_invalid_grant")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, _ = await code_for(ctx)
    wrong, _ = pkce_pair()
    return await redeem(ctx, code, wrong), Expect(400, json_error="invalid_grant")


@row("au31_missing_code_verifier_is_invalid_request")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, _ = await code_for(ctx)
    return await redeem(ctx, code, None), Expect(400, json_error="invalid_request")


@row("au32_token_request_with_another_redirect_uri_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx)
    response = await redeem(ctx, code, verifier, redirect_uri="http://127.0.0.1:33419/other")
    return response, Expect(400, json_error="invalid_request")


@row("au34_token_request_naming_another_tenant_is_invalid_target")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx)
    response = await redeem(ctx, code, verifier, resource=ctx.canonical(SECOND_SLUG))
    return response, Expect(400, json_error="invalid_target")


@row("au34_refresh_token_reuse_after_rotation_is_invalid_grant_and_revokes_the_family")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    code, verifier = await code_for(ctx)
    issued = (await redeem(ctx, code, verifier)).json()
    refresh = {
        "grant_type": "refresh_token",
        "client_id": ctx.clients["a"]["client_id"],
        "resource": ctx.canonical(),
    }
    rotated = await token_request(ctx.base, refresh_token=issued["refresh_token"], **refresh)
    assert rotated.status_code == 200, rotated.text
    replay = await token_request(ctx.base, refresh_token=issued["refresh_token"], **refresh)
    # The replay revoked the rotated family too (RFC 9700 §4.14.2): its refresh token is dead.
    after = await token_request(ctx.base, refresh_token=rotated.json()["refresh_token"], **refresh)
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant", after.text
    return replay, Expect(400, json_error="invalid_grant")


@row("au34_introspection_by_a_public_client_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        response = await http.post(
            f"{ctx.base}/oauth/introspect",
            data={"token": ctx.minted["valid"], "client_id": ctx.clients["a"]["client_id"]},
        )
    return response, Expect(
        401, json={"error": "invalid_client"}, headers={"www-authenticate": 'Basic realm="introspection"'}
    )


@row("au34_introspection_of_another_clients_token_says_inactive")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    confidential = ctx.clients["confidential"]
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        response = await http.post(
            f"{ctx.base}/oauth/introspect",
            data={"token": ctx.minted["valid"]},
            auth=(confidential["client_id"], confidential["client_secret"]),
        )
    return response, Expect(200, json={"active": False})


# --- registration ----------------------------------------------------------------------------------


@row("au32_javascript_redirect_uri_is_refused_at_registration")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, redirect_uris=["javascript:alert(1)"])
    return response, Expect(
        400,
        json={
            "error": "invalid_redirect_uri",
            "error_description": "the javascript: scheme is not allowed for redirect URIs",
        },
    )


@row("au32_data_redirect_uri_is_refused_at_registration")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, redirect_uris=["data:text/html,<script>alert(1)</script>"])
    return response, Expect(
        400,
        json={
            "error": "invalid_redirect_uri",
            "error_description": "the data: scheme is not allowed for redirect URIs",
        },
    )


@row("amb28_http_redirect_uri_off_loopback_is_refused_at_registration")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, redirect_uris=["http://evil.example/callback"])
    return response, Expect(400, json_error="invalid_redirect_uri")


@row("amb28_redirect_uri_with_user_credentials_is_refused_at_registration")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, redirect_uris=["https://trusted.example@evil.example/callback"])
    return response, Expect(
        400,
        json={
            "error": "invalid_redirect_uri",
            "error_description": "a redirect URI must not contain user credentials",
        },
    )


@row("au25_client_credentials_grant_is_refused_at_registration")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, grant_types=["client_credentials"])
    return response, Expect(400, json_error="invalid_client_metadata")


@row("au25_oversized_registration_metadata_is_413")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    response = await register(ctx.base, client_name="x" * 17000)
    return response, Expect(
        413,
        json={
            "error": "invalid_client_metadata",
            "error_description": "Registration metadata is limited to 16384 bytes.",
        },
    )


@row("au27_registration_rate_limit_is_429_with_retry_after")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    # Start early in a minute window, so the eleven registrations all fall in one.
    with anyio.fail_after(10):
        while time.time() % 60 > 50:
            await anyio.sleep(0.2)
    source = fresh_loopback()
    async with http_from(ctx.base, source) as http:
        body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        accepted = [(await http.post("/oauth/register", json=body)).status_code for _ in range(10)]
        assert accepted == [201] * 10
        response = await http.post("/oauth/register", json=body)
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 60
    return response, Expect(429, json_error="too_many_requests")


# --- client ID metadata documents ------------------------------------------------------------------


@row("au25_metadata_document_whose_client_id_differs_from_its_url_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    client_id = ctx.docs.url("/clients/liar.json")
    ctx.docs.publish("/clients/liar.json", client_document(ctx.docs.url("/clients/someone-else.json")))
    response = await authorize_anonymously(ctx, client_id=client_id)
    assert "/clients/liar.json" in ctx.docs.hits
    return response, Expect(400, page_says="Invalid client_id parameter value")


@row("au25_metadata_document_on_a_private_address_without_allow_list_is_never_fetched")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    # `localhost` resolves to loopback but is not on MCP_CIMD_ALLOWED_HOSTS (only 127.0.0.1 is).
    client_id = ctx.docs.url("/clients/private.json", host="localhost")
    ctx.docs.publish("/clients/private.json", client_document(client_id))
    response = await authorize_anonymously(ctx, client_id=client_id)
    assert "/clients/private.json" not in ctx.docs.hits
    return response, Expect(400, page_says="Invalid client_id parameter value")


@row("au32_metadata_document_with_a_javascript_redirect_uri_is_refused")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    client_id = ctx.docs.url("/clients/script.json")
    ctx.docs.publish(
        "/clients/script.json", client_document(client_id, redirect_uris=["javascript:alert(1)"])
    )
    response = await authorize_anonymously(ctx, client_id=client_id, redirect_uri="javascript:alert(1)")
    return response, Expect(400, page_says="Invalid client_id parameter value")


@row("au32_redirect_uri_not_in_the_metadata_document_gets_an_error_page")
async def _(ctx: Ctx) -> tuple[httpx.Response, Expect]:
    client_id = ctx.docs.url("/clients/honest.json")
    ctx.docs.publish("/clients/honest.json", client_document(client_id))
    response = await authorize_anonymously(
        ctx, client_id=client_id, redirect_uri="https://evil.example/callback"
    )
    return response, Expect(400, page_says="Mismatching redirect URI")


# --- the table ---------------------------------------------------------------------------------------


def test_the_hostile_table_has_at_least_thirty_named_rows() -> None:
    assert len(ROWS) >= 30, len(ROWS)


@pytest.mark.parametrize("name", list(ROWS))
async def test_hostile_request_gets_its_exact_answer(ctx: Ctx, name: str) -> None:
    response, expect = await ROWS[name](ctx)
    check(response, expect, ctx)


def test_a_valid_token_still_works_after_the_table(ctx: Ctx) -> None:
    """The table's attacks left the legitimate user's token usable (no collateral lock-out)."""
    response = httpx.post(
        ctx.canonical(),
        json=initialize_body(),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {ctx.minted['valid']}"},
        timeout=REQUEST_SECONDS,
    )
    assert response.status_code == 200, response.text
    assert json.loads(response.text)["result"]["serverInfo"]["name"] == SECURE_SLUG
