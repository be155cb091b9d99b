"""Encrypt the secret values of a handler (e.g. HTTP Authorization headers) at rest.

Fernet with a key from env ``MCP_SECRETS_KEY`` (a Fernet key, or any passphrase which is then
stretched with HKDF) or, when unset, derived from ``settings.SECRET_KEY`` with HKDF. Changing the
key makes stored secrets unreadable (they must be entered again). Values are never logged and
error messages never quote them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_INFO = b"mcp-platform handler secrets v1"


class SecretsError(Exception):
    """Stored secrets cannot be decrypted (wrong key or damaged value)."""


def _derive(material: bytes) -> bytes:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(material)
    return base64.urlsafe_b64encode(key)


@functools.cache
def _fernet_for(raw_env: str, secret_key: str) -> Fernet:
    if raw_env:
        try:
            if len(base64.urlsafe_b64decode(raw_env.encode())) == 32:
                return Fernet(raw_env.encode())
        except (binascii.Error, ValueError):
            pass
        return Fernet(_derive(raw_env.encode()))
    return Fernet(_derive(secret_key.encode()))


def fernet() -> Fernet:
    """Return the Fernet instance for the configured key."""
    return _fernet_for(os.environ.get("MCP_SECRETS_KEY", ""), settings.SECRET_KEY)


def encrypt_secrets(values: dict[str, str]) -> str:
    """Return the encrypted token of a JSON object of secret values ("" for no secrets)."""
    if not values:
        return ""
    if not isinstance(values, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in values.items()
    ):
        raise ValueError("secrets must be an object of string values")
    return fernet().encrypt(json.dumps(values).encode()).decode("ascii")


def decrypt_secrets(token: str) -> dict[str, str]:
    """Return the secret values stored in ``token`` ({} for an empty token)."""
    if not token:
        return {}
    try:
        values = json.loads(fernet().decrypt(token.encode("ascii")))
    except (InvalidToken, ValueError, UnicodeError):
        raise SecretsError("The stored secrets cannot be decrypted; enter them again.") from None
    if not isinstance(values, dict):
        raise SecretsError("The stored secrets are damaged; enter them again.")
    return values
