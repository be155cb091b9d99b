"""Encrypt the secret values of a handler (e.g. HTTP Authorization headers) at rest.

Fernet with a key from env ``MCP_SECRETS_KEY`` (a Fernet key, or any passphrase which is then
stretched with HKDF) or, when unset, derived from ``settings.SECRET_KEY`` with HKDF. Several keys at
once (MultiFernet): ``MCP_SECRETS_KEY`` may list them separated by commas, the first encrypting and
every one decrypting; without it, ``SECRET_KEY_FALLBACKS`` are the old keys. ``manage.py
rotate_secrets`` re-encrypts every stored value with the current key, after which an old key can go.
A key that is in none of those makes stored secrets unreadable (they must be entered again). Values
are never logged and error messages never quote them. The admin and the API check secret headers as
entered and show their names (never their values) through the helpers at the end.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ValidationError

_INFO = b"mcp-platform handler secrets v1"


class SecretsError(Exception):
    """Stored secrets cannot be decrypted (wrong key or damaged value)."""


def _derive(material: bytes) -> bytes:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(material)
    return base64.urlsafe_b64encode(key)


def _one(raw: str) -> Fernet:
    try:
        if len(base64.urlsafe_b64decode(raw.encode())) == 32:
            return Fernet(raw.encode())
    except (binascii.Error, ValueError):
        pass
    return Fernet(_derive(raw.encode()))


@functools.cache
def _fernet_for(raw_env: str, secret_keys: tuple[str, ...]) -> MultiFernet:
    listed = [key.strip() for key in raw_env.split(",") if key.strip()]
    if listed:
        return MultiFernet([_one(key) for key in listed])
    return MultiFernet([Fernet(_derive(key.encode())) for key in secret_keys])


def fernet() -> MultiFernet:
    """The configured keys: the first encrypts, every one decrypts."""
    return _fernet_for(
        os.environ.get("MCP_SECRETS_KEY", ""),
        (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())),
    )


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


def rotate(token: str) -> str:
    """``token`` encrypted again with the current key (SecretsError if no configured key reads it)."""
    if not token:
        return ""
    try:
        return fernet().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise SecretsError("The stored secrets cannot be decrypted with any configured key.") from None


def secret_names(token: str) -> list[str]:
    """The names of the secret headers stored in ``token``, for display (the values are never shown)."""
    if not token:
        return []
    try:
        return sorted(decrypt_secrets(token))
    except Exception:
        return ["(unreadable: enter the secrets again)"]


def check_secret_headers(value: Any) -> dict[str, str]:
    """Secret headers as entered (admin form, API): an object of valid header names → one-line values."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError("Secret headers must be a JSON object of header name → string value.")
    for name in value:
        if not name or any(ch in name for ch in " \t\r\n:") or not name.isascii():
            raise ValidationError(f"{name!r} is not a valid HTTP header name.")
    for header_value in value.values():
        if any(ch in header_value for ch in "\r\n\0"):
            raise ValidationError("Header values must not contain line breaks.")
    return value
