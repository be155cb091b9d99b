"""Serving an upstream's published prompts, resources and templates: the request goes upstream (AMB-192).

prompts/get, resources/read and completion/complete of a definition the catalog took from an upstream
(its `upstream` is set) are passed to that upstream through mcp_app.federation, the published name or
URI turned back into the upstream's own (core/upstream_uris.py), and the answer's URIs published
again. Failures are JSON-RPC errors that name the upstream by its name in the tenant and say what
the federation says (its host, never its URL's credentials or its headers): the upstream refusing
the request's parameters is -32602 (an unknown URI: the era's "resource not found"), anything else
-32603. The caller's own token never goes upstream, only the upstream's own headers.
"""

from __future__ import annotations

from typing import Any

from mcp_app import federation
from mcp_app.core import upstream_uris
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import UpstreamRef
from mcp_app.handlers import secrets, upstream_target
from mcp_app.protocol.jsonrpc import (
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    InternalError,
    InvalidParams,
    JsonRpcError,
    truncate,
)

# The upstream's codes for "no such thing" and "bad parameters": the client's request, not a failure.
_REFUSED = (INVALID_PARAMS, RESOURCE_NOT_FOUND)


async def target(ctx: RequestContext, ref: UpstreamRef) -> federation.Target:
    """The federation target of a published definition (handlers/upstream_target.py), its failures as
    JSON-RPC errors; with the caller's own token when the upstream acts as the caller (AMB-216)."""
    try:
        return await upstream_target.target(ref, ctx.tenant.id, ctx)
    except ToolError as exc:
        raise InternalError(truncate(f"Upstream {ref.name!r}: {exc.message}")) from None
    except secrets.SecretsError as exc:
        raise InternalError(truncate(f"Upstream {ref.name!r} cannot be called: {exc}")) from None


def error(ref: UpstreamRef, exc: federation.UpstreamError) -> JsonRpcError:
    """The JSON-RPC error of a failed exchange with ``ref``'s upstream."""
    message = truncate(f"Upstream {ref.name!r}: {exc.message}")
    if exc.code in _REFUSED:
        return InvalidParams(message)
    data: dict[str, Any] = {"upstream": ref.name}
    if isinstance(exc, federation.UpstreamUnavailable) and exc.retry_after is not None:
        data["retryAfter"] = round(exc.retry_after, 1)
    return InternalError(message, data=data)


async def get_prompt(ctx: RequestContext, ref: UpstreamRef, arguments: dict[str, str]) -> dict[str, Any]:
    """The upstream's prompt, its messages' resource links and embedded resources under published URIs."""
    try:
        result = await federation.get_prompt(await target(ctx, ref), ref.remote, arguments)
    except federation.UpstreamError as exc:
        raise error(ref, exc) from None
    messages = []
    for message in result.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), dict):
            content = upstream_uris.published_block(ref.prefix, message["content"])
            messages.append({**message, "content": content})
    out: dict[str, Any] = {"messages": messages}
    if isinstance(result.get("description"), str):
        out["description"] = result["description"]
    return out


async def read(
    ctx: RequestContext, ref: UpstreamRef, uri: str, not_found: JsonRpcError
) -> list[dict[str, Any]]:
    """The upstream's contents of the published ``uri``, each under its published URI.

    ``not_found`` is the era's error for a URI the upstream does not know (or one outside the prefix).
    """
    remote = upstream_uris.remote(ref.prefix, uri)
    if remote is None:
        raise not_found
    try:
        result = await federation.read_resource(await target(ctx, ref), remote)
    except federation.UpstreamError as exc:
        if exc.code in _REFUSED:
            raise not_found from None
        raise error(ref, exc) from None
    return [
        upstream_uris.published_contents(ref.prefix, contents)
        for contents in result.get("contents") or []
        if isinstance(contents, dict)
    ]


async def complete(
    ctx: RequestContext,
    ref: UpstreamRef,
    wire_ref: dict[str, Any],
    argument: dict[str, str],
    context: dict[str, str],
) -> dict[str, Any]:
    """The upstream's completion of a prompt argument or template variable (none when it offers none)."""
    if not ref.completions:
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
    key = "name" if wire_ref.get("type") == "ref/prompt" else "uri"
    remote_ref = {"type": wire_ref["type"], key: ref.remote}
    try:
        sent = {"name": argument["name"], "value": argument["value"]}
        result = await federation.complete(await target(ctx, ref), remote_ref, sent, context or None)
    except federation.UpstreamError as exc:
        raise error(ref, exc) from None
    completion = found if isinstance(found := result.get("completion"), dict) else {}
    values = [v for v in completion.get("values") or [] if isinstance(v, str)][:100]
    out: dict[str, Any] = {"values": values}
    for field_name in ("total", "hasMore"):
        if field_name in completion:
            out[field_name] = completion[field_name]
    return {"completion": out}
