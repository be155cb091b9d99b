"""Forms the person fills in on this platform's own page, never in the MCP client (URL-mode elicitation).

A `form` tool marked sensitive (API keys, card numbers) must not let its answers pass through the
client (client/elicitation "URL mode"). Its handler sends the person to `/t/<slug>/form/<token>`;
the token is signed (SECRET_KEY), expires with the question, and carries what the page needs: the
tenant, the fields, the message, the elicitation id and, on an OAuth tenant, the user who must be
signed in to fill it. The page stores the answers encrypted (handlers/secrets) under the elicitation
id, in Redis for MCP_URL_FORM_SECONDS (any process may serve the page) or in this process's memory
on the embedded defaults; the waiting handler takes them once. A person connecting an account
(handlers/accounts.py) is sent to another page the same way, and its completion noted in the same
store: `send_and_wait` is the one loop of both.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from django.conf import settings
from django.core import signing
from django.utils.crypto import salted_hmac

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.versions import is_modern
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


class CannotSend(ToolError):
    """The client cannot be sent to a page (no URL-mode elicitation, no stream to ask on)."""


async def send_and_wait(ctx: RequestContext, message: str, url: str, late: str) -> dict[str, Any]:
    """Send the person to ``url`` (URL-mode elicitation) and wait for what the page leaves under the call's id.

    Returns ``{"action": "accept", "content": <what the page left>}``, or the client's decline or
    cancel as it came. The link is keyed on the call, so every 2026-07-28 round shows the same one: a
    retry that finds nothing yet (after MCP_URL_FORM_WAIT_SECONDS) asks again, as the spec allows; a
    legacy call waits MCP_URL_FORM_SECONDS, then raises ToolError(``late``), and on success tells its
    client the out-of-band part is over (`notifications/elicitation/complete`, 2025-11-25 only).
    Raises CannotSend when the client cannot be asked (a 2026-07-28 client that did not declare URL
    mode raises MissingCapability, answered -32021 unless the caller says otherwise).
    """
    modern = is_modern(ctx.protocol_version)
    wait = settings.MCP_URL_FORM_WAIT_SECONDS if modern else settings.MCP_URL_FORM_SECONDS
    while True:
        try:
            consent = await ctx.elicit_url(message, url, ctx.call_id)
        except CannotSend:
            raise
        except ToolError as cannot:
            raise CannotSend(str(cannot)) from None
        if consent.get("action") != "accept":
            return consent
        left = await take(ctx.call_id, wait)
        if left is not None:
            break
        if not modern:
            raise ToolError(late)
    if not modern:
        done = {"elicitationId": ctx.call_id}
        await ctx.emit({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": done})
    return {"action": "accept", "content": left}
