"""The admin of connected accounts (AMB-207, AMB-211): a tenant's OAuth providers, and who is connected.

Owners add and edit providers (the client secret write-only: "set" or "none set", never its value)
and see each provider's connected people (who and since when, never a token); an owner's Disconnect
revokes the person's tokens at the provider before the row goes (connected_accounts/vault.disconnect). Other
members see neither: who connected what is the owners' business.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from mcp_app.connected_accounts import vault
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Connection, Provider
from tenants.admin import TenantScopedAdmin, editable_tenant_ids
from tenants.models import Role

OWNERS = frozenset({Role.OWNER})


class OwnersOnly(TenantScopedAdmin):
    edit_roles = OWNERS

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        qs = super().get_queryset(request)
        ids = editable_tenant_ids(request, OWNERS)
        return qs if ids is None else qs.filter(tenant_id__in=ids)

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = editable_tenant_ids(request, OWNERS)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = editable_tenant_ids(request, OWNERS)
        return ids is None or (bool(ids) if obj is None else obj.tenant_id in ids)


class ProviderForm(forms.ModelForm):
    new_client_secret = forms.CharField(
        required=False,
        label="Client secret",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text="Stored encrypted and never shown again; leave blank to keep it.",
    )
    clear_client_secret = forms.BooleanField(
        required=False, help_text="Remove the stored secret (a public client)."
    )

    class Meta:
        model = Provider
        fields = (
            "tenant", "name", "display_name", "discovery_url", "authorize_url", "token_url", "revocation_url",
            "client_id", "scopes", "resource",
        )  # fmt: skip

    def save(self, commit: bool = True) -> Any:
        provider = super().save(commit=False)
        if self.cleaned_data.get("clear_client_secret"):
            provider.client_secret = ""
        elif secret := self.cleaned_data.get("new_client_secret"):
            provider.client_secret = encrypt_secrets({"client_secret": secret})
        if commit:
            provider.save()
        return provider


@admin.register(Provider)
class ProviderAdmin(OwnersOnly):
    form = ProviderForm
    list_display = ("name", "display_name", "tenant", "client_id", "connected_count")
    search_fields = ("name", "display_name")
    readonly_fields = ("stored_secret", "connected", "redirect_uri")

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.URLField):
            kwargs["assume_scheme"] = "https"
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "name" and field is not None:
            field.help_text += " Once saved, this page shows the redirect URI to register at the provider."
        return field

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [*ProviderForm.Meta.fields, "stored_secret", "new_client_secret", "clear_client_secret"]
        return fields if obj is None else [*fields, "redirect_uri", "connected"]

    @admin.display(description="redirect URI")
    def redirect_uri(self, obj: Provider) -> str:
        return format_html(
            "<code id='redirect-uri'>{}</code><div class='help'>Register it at the provider as this "
            "client's redirect (callback) URI.</div>",
            obj.callback_url(),
        )

    @admin.display(description="stored client secret")
    def stored_secret(self, obj: Provider) -> str:
        return "set." if obj.client_secret else "none set."

    @admin.display(description="connected people")
    def connected_count(self, obj: Provider) -> int:
        return obj.connections.count()

    @admin.display(description="connected people")
    def connected(self, obj: Provider) -> str:
        rows = obj.connections.select_related("user").order_by("user__username")
        if not rows:
            return "Nobody has connected an account yet."
        return format_html_join(
            ", ", "{} (since {})", ((c.user.get_username(), f"{c.connected_at:%Y-%m-%d %H:%M}") for c in rows)
        )


@admin.register(Connection)
class ConnectionAdmin(OwnersOnly):
    """Who is connected to which provider; Delete is Disconnect (revoked at the provider first)."""

    list_display = ("user", "provider", "tenant", "connected_at", "refreshed_at", "expires_at")
    list_filter = ("provider",)
    search_fields = ("user__username", "provider__name")
    fields = ("tenant", "provider", "user", "connected_at", "refreshed_at", "expires_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Connection) -> None:
        if not self.has_delete_permission(request, obj):
            raise PermissionDenied
        async_to_sync(vault.disconnect)(obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        for obj in queryset.select_related("provider", "tenant", "user"):
            self.delete_model(request, obj)
