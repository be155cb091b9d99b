"""An MCP App's preview on its resource's admin page (AMB-275).

The app's HTML runs in an iframe `sandbox="allow-scripts"` (no same origin: it can reach neither the
admin page nor its cookies) loaded from `<id>/app-preview/`, which answers the saved HTML with the
Content-Security-Policy the extension has a host build from the resource's `_meta.ui.csp` (inline
scripts and styles, nothing from elsewhere unless declared), framable by the admin only. Not `srcdoc`:
a srcdoc document inherits the admin page's policy, whose scripts need our nonce, so every app's
inline script would be blocked with a console error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html

from mcp_app.core import ui_apps
from mcp_app.models import Resource


def preview_response(resource: Resource) -> HttpResponse:
    """The app's saved HTML under the policy a host would give it."""
    if not ui_apps.is_app_uri(resource.uri) or resource.blob is not None:
        raise Http404("Only a ui:// resource with HTML text has an app preview.")
    response = HttpResponse(resource.text, content_type="text/html; charset=utf-8")
    # django-csp leaves a policy a view set; X-Frame-Options likewise (Django's middleware).
    response["Content-Security-Policy"] = f"{ui_apps.content_security_policy(resource.meta)}; frame-ancestors 'self'"
    response["X-Frame-Options"] = "SAMEORIGIN"
    response["Cache-Control"] = "no-store"
    return response


# A mixin of a ModelAdmin: the type checker sees it as one (admin_site, get_object, permissions, super()).
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin
else:
    _AdminBase = object


class AppPreview(_AdminBase):
    """ResourceAdmin's preview field and page."""

    def app_preview_urls(self) -> list[Any]:
        site = self.admin_site
        opts = self.opts
        view = site.admin_view(self.app_preview_view)
        return [path("<path:object_id>/app-preview/", view, name=f"{opts.app_label}_{opts.model_name}_app_preview")]

    def app_preview_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        resource = self.get_object(request, object_id)
        if resource is None or not self.has_view_permission(request, resource):
            raise Http404("No such resource.")
        return preview_response(resource)

    @admin.display(description="app preview")
    def app_preview(self, obj: Resource) -> str:
        if obj.pk is None or not ui_apps.is_app_uri(obj.uri):
            return "An MCP App (a ui:// resource, text/html;profile=mcp-app) is previewed here once saved."
        src = reverse("admin:mcp_app_resource_app_preview", args=[obj.pk])
        return format_html(
            '<iframe class="app-preview" sandbox="allow-scripts" src="{}" title="Preview of the app {}" '
            'style="width:100%;max-width:640px;height:320px;border:1px solid var(--hairline-color);'
            'border-radius:6px;background:#fff"></iframe>'
            '<p class="help">The saved version, as a client with MCP Apps shows it before any tool result '
            "arrives (no host answers it here). Save to see your changes.</p>",
            src,
            obj.uri,
        )
