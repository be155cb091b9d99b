"""The tenant wall for Django's pages and the API (AMB-96): each request's database scope.

A signed-in user's requests see their tenants' rows (an active superuser's: every tenant's, recorded
in the audit trail at sign-in); a page under /t/<slug>/ also sees that tenant's (its connect page, its
dashboard, a form link). The views still decide who may see what; this is the second wall, in the
database. The MCP endpoints do not pass here: their consumer sets the URL's tenant itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase

from tenants import access, wall
from tenants.models import Tenant

TENANT_PATH = re.compile(r"^/t/(?P<slug>[-\w]+)/")


def request_scope(request: HttpRequest) -> wall.Scope:
    scope = access.wall_scope(getattr(request, "user", None))
    match = TENANT_PATH.match(request.path_info)
    if scope.bypass or match is None:
        return scope
    tenant_id = Tenant.objects.filter(slug=match["slug"]).values_list("id", flat=True).first()
    return scope if tenant_id is None else wall.Scope.of((*scope.tenants, tenant_id))


async def _scoped_async(scope: wall.Scope, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    iterator = aiter(chunks)
    while True:
        with wall.scoped(scope):
            try:
                chunk = await anext(iterator)
            except StopAsyncIteration:
                return
        yield chunk


class TenantWallMiddleware:
    """After authentication: runs the view, and a streaming body after it, inside the request's scope."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        scope = request_scope(request)
        with wall.scoped(scope):
            response = self.get_response(request)
        if isinstance(response, StreamingHttpResponse):  # `streaming` is True for these only
            content = response.streaming_content
            # An async body (response.is_async) is an async iterator, a sync one an iterator.
            response.streaming_content = (
                _scoped_async(scope, content)
                if isinstance(content, AsyncIterator)
                else wall.wrap_iterator(scope, content)
            )
        return response
