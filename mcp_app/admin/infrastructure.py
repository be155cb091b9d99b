"""The deployment's machinery in the admin: for superusers only (AMB-271).

Sign-in throttling (django-axes), the authorization server's grants and tokens (django-oauth-toolkit)
and the MCP session rows are how the platform runs, not what a tenant's owner defines: an owner's
admin shows their tools, prompts, resources, templates, upstreams, runs, approvals, audit log,
members, API keys, service clients and providers, and none of these. Each is registered again with
its own ModelAdmin behind a superuser gate, so its pages stay as they were for superusers and are a
403 (or not listed) for everyone else, whatever Django permissions they were granted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.contrib import admin
from django.http import HttpRequest

INFRASTRUCTURE = (
    "axes.AccessAttempt",
    "axes.AccessFailureLog",
    "axes.AccessLog",
    "oauth2_provider.AccessToken",
    "oauth2_provider.Grant",
    "oauth2_provider.IDToken",
    "oauth2_provider.RefreshToken",
    "oauth2_provider.Application",
    "mcp_app.McpSession",
)


def _superuser(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_superuser)


# A mixin of a ModelAdmin: the type checker sees it as one (admin_site, get_object, permissions, super()).
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin
else:
    _AdminBase = object


class SuperusersOnly(_AdminBase):
    """has_*_permission: an active superuser, and nobody else."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _superuser(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _superuser(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return _superuser(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _superuser(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _superuser(request) and super().has_delete_permission(request, obj)


def gate(site: admin.AdminSite = admin.site) -> None:
    """Put every registered infrastructure model's admin behind SuperusersOnly (after they registered)."""
    for label in INFRASTRUCTURE:
        model = apps.get_model(label)
        if not site.is_registered(model):
            continue
        current = type(site.get_model_admin(model))
        if issubclass(current, SuperusersOnly):
            continue
        site.unregister(model)
        site.register(model, type(f"SuperusersOnly{current.__name__}", (SuperusersOnly, current), {}))
