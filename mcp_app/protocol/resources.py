"""resources/list, resources/templates/list, resources/read, resources/(un)subscribe (RS-01..10)."""

from __future__ import annotations

from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.content.blocks import resource_contents
from mcp_app.core.context import RequestContext, resources_of
from mcp_app.core.errors import HandlerError
from mcp_app.core.types import Catalog, ResourceDef, TemplateDef
from mcp_app.core.versions import is_modern
from mcp_app.governance import decision, guardrails
from mcp_app.handlers import registry
from mcp_app.protocol import asking, shaping, upstream_extras, uritemplates
from mcp_app.protocol.jsonrpc import InternalError, InvalidParams, JsonRpcError, ResourceNotFound, truncate
from mcp_app.protocol.pagination import paginate, with_cursor

# A session's subscriptions live in its state, which every request of the session loads.
MAX_SUBSCRIPTIONS = 1000
MAX_ECHOED_URI = 2048


def describe_resource(resource: ResourceDef) -> dict[str, Any]:
    return {
        "uri": resource.uri,
        "name": resource.name,
        "title": resource.title,
        "description": resource.description,
        "mimeType": resource.mime_type,
        "size": resource.size,
        "annotations": resource.annotations,
        "icons": resource.icons,
        "_meta": resource.meta,
    }


def describe_template(template: TemplateDef) -> dict[str, Any]:
    return {
        "uriTemplate": template.uri_template,
        "name": template.name,
        "title": template.title,
        "description": template.description,
        "mimeType": template.mime_type,
        "annotations": template.annotations,
        "icons": template.icons,
        "_meta": template.meta,
    }


def not_found(ctx: RequestContext, uri: str) -> JsonRpcError:
    """-32002 for legacy clients; 2026-07-28 answers -32602 (Invalid Params), both with data.uri."""
    shown = truncate(uri, MAX_ECHOED_URI)
    error = InvalidParams if is_modern(ctx.protocol_version) else ResourceNotFound
    return error(truncate(f"Resource not found: {uri}", 300), data={"uri": shown})


def find_template(catalog: Catalog, uri: str) -> tuple[TemplateDef, dict[str, str]] | None:
    """The first template (in uriTemplate order) that `uri` expands, with its variables; the tenant's
    own templates before those published from upstream servers (they win a collision: AMB-191)."""
    for upstream in (False, True):
        for template in catalog.templates:
            if (template.upstream is not None) != upstream:
                continue
            variables = uritemplates.match(template.uri_template, uri)
            if variables is not None:
                return template, variables
    return None


def served_upstream(catalog: Catalog, uri: str) -> str | None:
    """The name of the upstream server that serves ``uri`` (a resource or a template's expansion), if one does."""
    resource = catalog.resources_by_uri.get(uri)
    if resource is not None:
        return resource.upstream.name if resource.upstream is not None else None
    found = find_template(catalog, uri)
    if found is not None and found[0].upstream is not None:
        return found[0].upstream.name
    return None


def _uri(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParams('"uri" is required (a non-empty string).')
    return uri


async def handle_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    shown = await decision.shown(ctx, catalog, catalog.resources)
    page, next_cursor = paginate(ctx, params, "resources", shown, lambda r: r.uri)
    resources = [shaping.resource(describe_resource(r), ctx.protocol_version) for r in page]
    return with_cursor({"resources": resources}, next_cursor)


async def handle_templates_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    shown = await decision.shown(ctx, catalog, catalog.templates)
    page, next_cursor = paginate(ctx, params, "templates", shown, lambda t: t.uri_template)
    templates = [shaping.resource_template(describe_template(t), ctx.protocol_version) for t in page]
    return with_cursor({"resourceTemplates": templates}, next_cursor)


async def handle_read(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Read a static resource, or an expansion of one of the tenant's templates; nothing else (RS-10)."""
    uri = _uri(params)
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    resource = catalog.resources_by_uri.get(uri)
    if resource is not None and decision.hidden(ctx, catalog, resource, "resources/read"):
        raise not_found(ctx, uri)
    if resource is not None and resource.upstream is not None:
        contents = await upstream_extras.read(ctx, resource.upstream, uri, not_found(ctx, uri))
    elif resource is not None:
        contents = [resource_contents(resource)]
    else:
        found = find_template(catalog, uri)
        if found is None:
            raise not_found(ctx, uri)
        template, variables = found
        if decision.hidden(ctx, catalog, template, "resources/read"):
            raise not_found(ctx, uri)
        if (denial := decision.check(ctx, catalog, template, dict(variables), "resources/read")) is not None:
            raise InvalidParams(
                truncate(denial.message("resource template", template.name), 300),
                data={"policy": denial.policy},
            )
        if template.upstream is not None:
            contents = await upstream_extras.read(ctx, template.upstream, uri, not_found(ctx, uri))
            shaped = [shaping.resource_contents(c, ctx.protocol_version) for c in contents]
            return await _guarded(ctx, catalog, uri, {"contents": shaped})

        async def read(ctx: RequestContext) -> dict[str, Any]:
            try:
                return {"contents": await registry.read_template(ctx, template, uri, variables)}
            except HandlerError as exc:
                raise InternalError(truncate(f"The resource could not be read: {exc.message}")) from None

        # A template's handler may ask the client (protocol/asking.py) before it answers.
        ctx = ctx.but(resources=resources_of(catalog.resources_by_uri))
        result = await asking.answering(ctx, "resources/read", uri, {}, params, read)
        if "contents" not in result:
            return result  # a question for the client: InputRequiredResult
        contents = result["contents"]
    shaped = [shaping.resource_contents(c, ctx.protocol_version) for c in contents if isinstance(c, dict)]
    return await _guarded(ctx, catalog, uri, {"contents": shaped})


async def _guarded(ctx: RequestContext, catalog: Catalog, uri: str, result: dict[str, Any]) -> dict[str, Any]:
    """What a read returns, through the tenant's guardrails on results (AMB-354)."""
    guarded = await guardrails.scan(ctx, "resources/read", catalog, uri, result, "result", "resource")
    if guarded.blocked is not None:
        raise InternalError(guarded.blocked.message(), data={"guardrail": guarded.blocked.guardrail})
    scanned: dict[str, Any] = guarded.value
    return scanned


async def handle_subscribe(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Subscribe the session to a resource or template expansion (AMB-21); stateless: accepted, no effect."""
    uri = _uri(params)
    catalog = await catalogs.get_catalog(ctx.tenant.id)
    resource, found = catalog.resources_by_uri.get(uri), find_template(catalog, uri)
    target = resource if resource is not None else (found[0] if found is not None else None)
    if target is None or decision.hidden(ctx, catalog, target, "resources/subscribe"):
        raise not_found(ctx, uri)
    upstream = served_upstream(catalog, uri)
    if upstream is not None:
        # Its changes would have to be heard upstream and relayed per session: not done, so not accepted
        # (a subscription that never hears anything would be worse than a refusal: AMB-193).
        raise InvalidParams(
            truncate(
                f"Resource {uri} is served by upstream server {upstream!r}: subscribing to it is not "
                "supported (its updates are not relayed); read it again instead.",
                MAX_ECHOED_URI + 200,
            ),
            data={"uri": truncate(uri, MAX_ECHOED_URI)},
        )
    session = ctx.session
    if session is not None and uri not in session.subscriptions:
        if len(session.subscriptions) >= MAX_SUBSCRIPTIONS:
            raise InvalidParams(f"Too many subscriptions (at most {MAX_SUBSCRIPTIONS} per session).")
        session.subscriptions.append(uri)
    return {}


async def handle_unsubscribe(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Drop a subscription; unsubscribing from something never subscribed is not an error."""
    uri = _uri(params)
    if ctx.session is not None and uri in ctx.session.subscriptions:
        ctx.session.subscriptions.remove(uri)
    return {}
