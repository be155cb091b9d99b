"""Forms the person fills in on this platform's own page, never in the MCP client (URL-mode elicitation).

A `form` tool marked sensitive (API keys, card numbers) must not let its answers pass through the
client (client/elicitation "URL mode"). Its handler sends the person to `/t/<slug>/form/<token>`;
the token is signed (SECRET_KEY), expires with the question, and carries what the page needs: the
tenant, the fields, the message, the elicitation id and, on an OAuth tenant, the user who must be
signed in to fill it. The page stores the answers encrypted (handlers/secrets) under the elicitation
id, in Redis for MCP_URL_FORM_SECONDS (any process may serve the page) or in this process's memory
on the embedded defaults; the waiting handler takes them once.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from django.conf import settings
from django.core import signing
from django.utils.crypto import salted_hmac

from mcp_app.handlers.secrets import fernet
from mcp_app.infra import redis_client

SALT = "mcp.url-form"
POLL_SECONDS = 0.2
_local: dict[str, tuple[float, str]] = {}  # elicitation id -> (expiry, encrypted answers), no Redis


def _key(elicitation_id: str) -> str:
    return f"mcp:url-form:{elicitation_id}"


def user_mark(user_id: int) -> str:
    """Who may fill the form, without putting anything about the person in the link (elicitation "Safe URL Handling")."""
    return salted_hmac(SALT, str(user_id)).hexdigest()[:32]


def page_token(
    *, tenant_id: int, elicitation_id: str, message: str, fields: dict[str, Any], user_id: int | None
) -> str:
    user = user_mark(user_id) if user_id is not None else None
    payload = {"t": tenant_id, "e": elicitation_id, "m": message, "f": fields, "u": user}
    return signing.dumps(payload, salt=SALT, compress=True)


def read_token(token: str) -> dict[str, Any] | None:
    """The page's question, or None for a token that is forged, damaged or expired."""
    try:
        payload = signing.loads(token, salt=SALT, max_age=settings.MCP_URL_FORM_SECONDS)
    except signing.BadSignature:
        return None
    return payload if isinstance(payload, dict) else None


def page_url(tenant_slug: str, token: str) -> str:
    return f"{settings.MCP_PUBLIC_URL}/t/{tenant_slug}/form/{token}"


def store(elicitation_id: str, answers: dict[str, Any]) -> bool:
    """Keep the page's answers for the waiting handler; False when this question was answered already."""
    sealed = fernet().encrypt(json.dumps(answers).encode()).decode("ascii")
    seconds = int(settings.MCP_URL_FORM_SECONDS)
    if redis_client.enabled():
        return bool(redis_client.sync_client().set(_key(elicitation_id), sealed, ex=seconds, nx=True))
    now = time.monotonic()
    for stale in [k for k, (expiry, _) in _local.items() if expiry < now]:
        del _local[stale]
    if elicitation_id in _local:
        return False
    _local[elicitation_id] = (now + seconds, sealed)
    return True


def _unsealed(sealed: str) -> dict[str, Any]:
    return json.loads(fernet().decrypt(sealed.encode("ascii")))


async def take(elicitation_id: str, seconds: float) -> dict[str, Any] | None:
    """The answers given on the page, waiting up to `seconds` for them; None if none came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, seconds)
    while True:
        if redis_client.enabled():
            sealed = await redis_client.client().getdel(_key(elicitation_id))
        else:
            entry = _local.pop(elicitation_id, None)
            sealed = entry[1] if entry else None
        if sealed is not None:
            return _unsealed(sealed)
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(POLL_SECONDS)
