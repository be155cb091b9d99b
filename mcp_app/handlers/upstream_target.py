"""The federation target of a call to an upstream: the one place it is built (AMB-310).

Every exchange with an upstream server starts here, whoever makes it: a published tool's call
(handlers/upstream.py), a published prompt, resource or completion (protocol/upstream_extras.py),
and the owner's own discovery, sync, watcher and self-check (upstreams/service.py), each from the
`UpstreamRef` the row gave (`Upstream.ref`). The upstream's secret headers and its OAuth client
secret are decrypted here, for this call only. An upstream that acts as the caller (``connection``,
AMB-216) gets the calling person's own token at that provider instead of its OAuth client's (the
person is asked to connect first: handlers/accounts.py); without a caller (the owner's discovery and
sync) it uses its own credentials.
"""

from __future__ import annotations

from mcp_app import federation
from mcp_app.core.context import RequestContext
from mcp_app.core.types import UpstreamRef
from mcp_app.handlers import accounts
from mcp_app.handlers.secrets import decrypt_secrets


async def target(ref: UpstreamRef, tenant_id: int, ctx: RequestContext | None = None) -> federation.Target:
    """The target of a call to ``ref``'s upstream on behalf of ``ctx``'s caller (None: the owner's own).

    The caller's token enters the pool key with the other headers, so no two people share a session.
    Raises ToolError (accounts.access_token) when the caller has no token and does not connect, and
    secrets.SecretsError when a stored secret cannot be decrypted.
    """
    bearer = await accounts.access_token(ctx, ref.connection) if ctx is not None and ref.connection else ""
    oauth = dict(ref.oauth)
    credentials = None
    if oauth.get("client_id") and not bearer:  # the caller's token replaces the client's own
        credentials = federation.ClientCredentials(
            client_id=oauth["client_id"],
            client_secret=decrypt_secrets(oauth.get("secret", "")).get("client_secret", ""),
            token_url=oauth.get("token_url", ""),
            scope=oauth.get("scope", ""),
        )
    return federation.Target(
        tenant_id=tenant_id,
        upstream_id=ref.upstream_id,
        url=ref.url,
        headers=tuple(sorted(_with_bearer(decrypt_secrets(ref.secrets), bearer).items())),
        timeout_seconds=float(ref.timeout_seconds),
        mode=ref.mode,
        transport=ref.transport,
        oauth=credentials,
    )


def _with_bearer(headers: dict[str, str], bearer: str) -> dict[str, str]:
    """The caller's token as Authorization, over any secret one."""
    if not bearer:
        return headers
    kept = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    return {**kept, "Authorization": f"Bearer {bearer}"}
