"""A revocation made in another process reaches a Daphne that caches tokens for an hour, at once.

Daphne here runs with MCP_TOKEN_CACHE_SECONDS=3600, so only the Redis eviction message (published by
the revoking process after its commit) can explain a refusal within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e import oauth_flow
from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.servers import DaphneServer, django_shell, start_daphne

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="the revocation reaches the other process through Redis pub/sub"),
]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}
SCOPES = "mcp:tools mcp:prompts mcp:resources"


@pytest.fixture(scope="module")
def long_cache_server(
    e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    django_shell(e2e_env, oauth_flow.SETUP_CODE)
    env = {**e2e_env, "MCP_TOKEN_CACHE_SECONDS": "3600"}
    daphne = start_daphne("daphne-long-cache", env, tmp_path_factory.mktemp("daphne-long-cache"))
    yield daphne
    daphne.stop()


def mint(server: DaphneServer, user: str = oauth_flow.SECURE_USER) -> str:
    spec = oauth_flow.token_spec(user, [server.mcp_url(oauth_flow.SECURE_SLUG)], SCOPES)
    django_shell(server.env, oauth_flow.mint_code([spec]))
    return spec["token"]


def initialize(server: DaphneServer, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(
        server.mcp_url(oauth_flow.SECURE_SLUG), json=INITIALIZE, headers=headers, timeout=REQUEST_SECONDS
    )


def refused_within(server: DaphneServer, token: str, seconds: float) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while True:
        response = initialize(server, token)
        if response.status_code != 200 or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def test_au42_a_token_revoked_by_another_process_is_refused_at_once_by_a_daphne_caching_for_an_hour(
    long_cache_server: DaphneServer,
) -> None:
    token = mint(long_cache_server)
    assert initialize(long_cache_server, token).status_code == 200
    assert initialize(long_cache_server, token).status_code == 200  # now cached for an hour
    django_shell(
        long_cache_server.env,
        "from oauth2_provider.models import AccessToken\n"
        "from mcp_app.oauth.tokens import checksum\n"
        f"AccessToken.objects.get(token_checksum=checksum({token!r})).revoke()\n",
    )
    response = refused_within(long_cache_server, token, 3.0)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_au44_a_membership_removed_by_another_process_is_refused_at_once(
    long_cache_server: DaphneServer,
) -> None:
    django_shell(
        long_cache_server.env,
        "from django.contrib.auth import get_user_model\n"
        "from tenants.models import Membership, Tenant\n"
        "user, _ = get_user_model().objects.get_or_create(username='leaving-member')\n"
        "Membership.objects.get_or_create(user=user, tenant=Tenant.objects.get(slug='secure'))\n",
    )
    token = mint(long_cache_server, "leaving-member")
    assert initialize(long_cache_server, token).status_code == 200
    django_shell(
        long_cache_server.env,
        "from tenants.models import Membership\n"
        "Membership.objects.get(user__username='leaving-member', tenant__slug='secure').delete()\n",
    )
    response = refused_within(long_cache_server, token, 3.0)
    assert response.status_code == 401
    assert "not an active member" in response.headers["www-authenticate"]
