"""What every test package builds the same way: the request context a handler or method runs under."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app import catalog
from mcp_app.catalog import loader
from mcp_app.core.context import ASK_TOGETHER, Asker, RequestContext, ResourceLookup, SessionState


def tenant_resources(tenant_id: int) -> ResourceLookup:
    """What the protocol layer hands a handler: the tenant's enabled resources, from its catalog."""

    async def lookup() -> Any:
        return (await catalog.get_catalog(tenant_id)).resources_by_uri

    return lookup


def make_ctx(
    tenant: Any,
    version: str = "2025-11-25",
    session: SessionState | None | bool = True,
    log_level: str | None = None,
    **kwargs: Any,
) -> RequestContext:
    """A context for `tenant` at `version`, as the transport builds one.

    session=True makes a fresh initialized session (with `log_level` set, as after logging/setLevel),
    None a request without one; the tenant's resources come from its catalog, as tools/call gives them.
    """
    info = loader.tenant_info(tenant)
    if session is True:
        session = SessionState(
            id="sess-1", tenant_id=tenant.id, protocol_version=version, initialized=True, log_level=log_level
        )
    kwargs.setdefault("resources", tenant_resources(tenant.id))
    return RequestContext(tenant=info, protocol_version=version, session=session or None, **kwargs)


def fake_client(answer: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> Asker:
    """A stand-in for the client a handler asks: `answer` takes each question; a group asked together
    (core.context.ASK_TOGETHER, AMB-122) is answered one question at a time, by name."""

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("method") == ASK_TOGETHER:
            requests = request["params"]["requests"]
            return {"results": {name: await answer(question) for name, question in requests.items()}}
        return await answer(request)

    return ask
