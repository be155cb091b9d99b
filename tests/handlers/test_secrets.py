"""Encrypted handler secrets."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from mcp_app.handlers import secrets
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets, encrypt_secrets


def test_secrets_round_trip_and_the_token_does_not_contain_the_values():
    token = encrypt_secrets({"Authorization": "Bearer top-secret"})
    assert "top-secret" not in token
    assert decrypt_secrets(token) == {"Authorization": "Bearer top-secret"}


def test_no_secrets_is_an_empty_token():
    assert encrypt_secrets({}) == ""
    assert decrypt_secrets("") == {}


def test_token_from_another_key_fails_with_a_message_that_quotes_nothing(monkeypatch):
    token = encrypt_secrets({"X-Key": "abc123"})
    monkeypatch.setenv("MCP_SECRETS_KEY", "a different passphrase")
    with pytest.raises(SecretsError, match="enter them again") as info:
        decrypt_secrets(token)
    assert "abc123" not in str(info.value)


def test_mcp_secrets_key_accepts_a_fernet_key(monkeypatch):
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("MCP_SECRETS_KEY", key)
    token = encrypt_secrets({"A": "b"})
    assert Fernet(key.encode()).decrypt(token.encode()) == b'{"A": "b"}'
    assert secrets.decrypt_secrets(token) == {"A": "b"}


def test_non_string_secret_values_are_refused():
    with pytest.raises(ValueError, match="string values"):
        encrypt_secrets({"A": 1})  # type: ignore[dict-item]


def test_several_keys_decrypt_and_the_first_one_encrypts(monkeypatch):
    monkeypatch.setenv("MCP_SECRETS_KEY", "old passphrase")
    old_token = encrypt_secrets({"A": "b"})
    monkeypatch.setenv("MCP_SECRETS_KEY", "new passphrase, old passphrase")
    assert decrypt_secrets(old_token) == {"A": "b"}
    new_token = encrypt_secrets({"A": "c"})
    monkeypatch.setenv("MCP_SECRETS_KEY", "new passphrase")
    assert decrypt_secrets(new_token) == {"A": "c"}
    with pytest.raises(SecretsError):
        decrypt_secrets(old_token)


def test_secrets_written_under_a_secret_key_now_in_the_fallbacks_still_decrypt(monkeypatch, settings):
    monkeypatch.delenv("MCP_SECRETS_KEY", raising=False)
    token = encrypt_secrets({"A": "b"})
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a brand new secret key of enough length for django to accept it"
    assert decrypt_secrets(token) == {"A": "b"}
    rotated = secrets.rotate(token)
    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone: only what was rotated can be read
    assert decrypt_secrets(rotated) == {"A": "b"}
    with pytest.raises(SecretsError):
        decrypt_secrets(token)
    with pytest.raises(SecretsError, match="any configured key"):
        secrets.rotate(token)
