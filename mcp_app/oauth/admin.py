"""Registered OAuth clients in the admin: listed, inspected, and revoked (AMB-26).

Installed through django-oauth-toolkit's APPLICATION_ADMIN_CLASS setting. Clients are global (one
authorization server for every tenant), so only superusers see them. Revoking a client deletes its
tokens and grants and empties its redirect URIs, which stops any new authorization; deleting it
removes it entirely (a CIMD client would be fetched again on its next visit, so revoke keeps the row).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from oauth2_provider.admin import ApplicationAdmin as DotApplicationAdmin
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from audit.models import Action
from audit.trail import record
from mcp_app.oauth import registration

REVOKED_MARK = "[revoked] "


def revoke_clients(queryset: QuerySet) -> int:
    """Delete every token and grant of these clients and disable them; return how many."""
    count = 0
    with transaction.atomic():
        # A fresh queryset: the changelist's is annotated (GROUP BY), which FOR UPDATE refuses.
        pks = list(queryset.values_list("pk", flat=True))
        for application in queryset.model.objects.filter(pk__in=pks).select_for_update():
            refresh, _ = get_refresh_token_model().objects.filter(application=application).delete()
            access, _ = get_access_token_model().objects.filter(application=application).delete()
            get_grant_model().objects.filter(application=application).delete()
            detail = {"name": application.name, "access_tokens": access, "refresh_tokens": refresh}
            record(Action.CLIENT_REVOKED, client_id=application.client_id, detail=detail)
            application.redirect_uris = ""
            if application.registration_source == application.RegistrationSource.CIMD:
                # Never re-fetch the document: that would restore its redirect URIs.
                application.cimd_expires_at = datetime(9999, 12, 31, tzinfo=UTC)
            if not application.name.startswith(REVOKED_MARK):
                application.name = (REVOKED_MARK + application.name)[:255]
            application.save(update_fields=["redirect_uris", "name", "cimd_expires_at", "updated"])
            count += 1
    return count


class ApplicationAdmin(DotApplicationAdmin):
    list_display = (
        "name",
        "client_id_short",
        "registration_source",
        "client_type",
        "live_tokens",
        "created",
    )
    list_filter = ("registration_source", "client_type")
    search_fields = ("name", "client_id")
    ordering = ("-created",)
    actions = ("revoke_selected",)
    readonly_fields = (
        "client_id",
        "registration_source",
        "cimd_expires_at",
        "created",
        "updated",
        "declared_metadata",
    )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(token_count=Count("accesstoken", distinct=True))

    @admin.display(description="client ID")
    def client_id_short(self, obj: Any) -> str:
        return obj.client_id if len(obj.client_id) <= 60 else obj.client_id[:57] + "…"

    @admin.display(description="access tokens", ordering="token_count")
    def live_tokens(self, obj: Any) -> int:
        return getattr(obj, "token_count", 0)

    @admin.display(description="declared logo and links")
    def declared_metadata(self, obj: Any) -> str:
        display = registration.display_metadata(obj.client_id) if obj and obj.pk else {}
        if not display:
            return "—"
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}: {}</li>", display.items()))

    @admin.action(description="Revoke selected clients (delete their tokens, refuse new authorizations)")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = revoke_clients(queryset)
        self.message_user(request, f"Revoked {count} client(s).", messages.SUCCESS)
