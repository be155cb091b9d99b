"""The authorization server's machine-to-machine endpoints are posted by clients, not browsers: no CSRF."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client


@pytest.fixture
def strict_client(db) -> Client:
    # Django's test client skips CSRF unless asked; real clients have no CSRF cookie at all.
    cache.clear()
    yield Client(enforce_csrf_checks=True)
    cache.clear()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/oauth/token", 400),  # invalid_request/unsupported_grant_type, not Django's CSRF page
        ("/oauth/revoke", 401),  # invalid_client: no client named
        ("/oauth/introspect", 401),  # invalid_client: introspection needs a confidential client
        ("/oauth/register", 400),
    ],
)
def test_au34_token_revoke_introspect_and_register_answer_clients_without_a_csrf_token(
    strict_client: Client, path: str, expected: int
) -> None:
    response = strict_client.post(path, data={"token": "x"})
    assert response.status_code == expected, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
