"""The caller's own account at a provider, for a tool that acts as the person (connected accounts, AMB-215).

An `http` tool whose configuration names a `connection` (a provider of the tenant, mcp_app/connected_accounts)
sends the caller's access token there. When the caller has no usable connection, the call asks the
person to connect through URL-mode elicitation: the link is our own start page for that provider,
signed for this user and this call (its elicitation id is the call's id, the same in every
2026-07-28 round). A legacy call waits there for the connection (up to MCP_URL_FORM_SECONDS), sends
`notifications/elicitation/complete` and goes on; a 2026-07-28 call waits a little
(MCP_URL_FORM_WAIT_SECONDS) and otherwise asks again, so the client's retried round finds the
connection made. A client that cannot be sent to a URL gets an error whose message carries the link.
Only a signed-in caller (an OAuth token or an API key of a member) has connections.

The vault stores rows, a layer above this one: it installs its `access_token` here at start-up
(`install`, from McpAppConfig.ready), and raises the two exceptions defined here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_app.core.context import RequestContext
from mcp_app.core.errors import MissingCapability, ToolError
from mcp_app.handlers import url_forms


class NotConnected(Exception):
    """The person has no usable connection to the provider: send them to ``start_url``."""

    def __init__(self, provider: str, start_url: str) -> None:
        super().__init__(f"Connect your {provider} account first: {start_url}")
        self.provider = provider
        self.start_url = start_url


class ConnectionUnavailable(Exception):
    """The connection exists but no token could be had now (the provider unreachable); ``message`` is safe."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# (tenant id, user id, provider name, elicitation id) -> the access token; raises the exceptions above.
Source = Callable[[int, int, str, str | None], Awaitable[str]]
_source: Source | None = None


def install(source: Source) -> None:
    global _source
    _source = source


async def access_token(ctx: RequestContext, provider: str) -> str:
    """The caller's access token at ``provider``, asking the person to connect first when they have none.

    Raises ToolError (the message says what to do) when there can be none: an anonymous caller, a
    person who declines or does not connect in time, a provider that cannot be reached.
    """
    if ctx.user_id is None:
        raise ToolError(
            f"This tool acts as the person calling it, with their {provider} account: it needs a "
            "signed-in caller (an OAuth sign-in or a member's API key), and this request has none."
        )
    if _source is None:  # the identity app is not installed: a configuration error, said plainly
        raise ToolError("Connected accounts are not available on this server.")
    while True:
        try:
            return await _source(ctx.tenant.id, ctx.user_id, provider, ctx.call_id)
        except NotConnected as missing:
            shown, link = missing.provider or provider, missing.start_url
        except ConnectionUnavailable as down:
            raise ToolError(down.message) from None
        await _connect(ctx, shown, link)


async def _connect(ctx: RequestContext, provider: str, link: str) -> None:
    """Send the person to the start page and wait for the connection (ToolError when it does not come)."""
    message = f"Connect your {provider} account so this tool can act as you. (Open the page to connect.)"
    late = f"The {provider} account was not connected in time; nothing was done."
    try:
        answer = await url_forms.send_and_wait(ctx, message, link, late)
    except (MissingCapability, url_forms.CannotSend):
        raise ToolError(
            f"This tool needs your {provider} account, which is not connected, and this client cannot "
            f"open a link for you. Open this link in your browser to connect it, then call the tool "
            f"again: {link}"
        ) from None
    if answer.get("action") != "accept":
        said = "declined" if answer.get("action") == "decline" else "cancelled"
        raise ToolError(f"The person {said} connecting their {provider} account; nothing was done.")
